"""What the vectors' full rows lose when kept in fewer bits: the share of the exact first 10 and
200 that the rows' own scores still find, rows as a store keeps them (float16) against int8.

    .venv/bin/python bench/row_precision.py [--vectors /tmp/soul-100000.json.vectors] [--questions 300]

The vectors file is the one bench/bench_vectors_memory.py makes for its synthetic soul (run it
once first), or any soul's `soul.json.vectors`. The questions are bench/synthetic.py's and
LoCoMo dev's, embedded by the shipped model. Each way of keeping the rows scores every row, with
no shortlist (what the full rows are for: the last look at a search's picks); a row it ranks in
the first n counts as found when its exact cosine is at least the exact n-th (ties count).

  int8            each row scaled by its largest coordinate to -127..127
  int8, centred   the rows' mean taken off first (the mean's product is the same for every
                  row, so it changes no order), then as above: the rows differ from one
                  another in much less than their whole length
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synthetic  # noqa: E402
from soulgraph.engine import embeddings  # noqa: E402

LOCOMO = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo" / "locomo-dev.json"


def int8_rows(rows, centre):
    import numpy as np

    shifted = rows - centre
    scale = np.abs(shifted).max(axis=1, keepdims=True) / 127.0
    scale[scale == 0] = 1.0
    return np.round(shifted / scale).astype(np.int8).astype(np.float32) * scale


def found(exact, approx, n):
    import numpy as np

    bar = np.partition(exact, len(exact) - n)[len(exact) - n]
    picked = np.argpartition(-approx, n)[:n]
    return float(np.mean(exact[picked] >= bar))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vectors", type=Path, default=Path("/tmp/soul-100000.json.vectors"))
    parser.add_argument("--questions", type=int, default=300)
    args = parser.parse_args()
    if not args.vectors.exists():
        sys.exit(f"{args.vectors}: no such file; make it with bench/bench_vectors_memory.py --size 100000")
    import numpy as np

    with np.load(args.vectors, allow_pickle=False) as data:
        rows = data["matrix"].astype(np.float32)
    model = embeddings.default_model()
    sets = {"synthetic": synthetic.questions(args.questions)}
    if LOCOMO.exists():
        conversations = json.loads(LOCOMO.read_text())
        sets["LoCoMo dev"] = [qa["question"] for c in conversations for qa in c["qa"]][: args.questions]
    kept = {"int8": int8_rows(rows, 0.0), "int8, centred": int8_rows(rows, rows.mean(axis=0))}
    print(f"{len(rows):,} rows of {rows.shape[1]}; share of the exact first 10 / 200 found by the rows' own scores")
    print(f"{'questions':<12} | {'rows':<14} | {'first 10':>8} | {'first 200':>9} | {'MB at these rows':>16}")
    for name, questions in sets.items():
        vectors = [model.embed(q) for q in questions]
        for label, approx_rows in (("float16", None), *kept.items()):
            tens = hundreds = 0.0
            for vector in vectors:
                exact = rows @ vector
                approx = exact if approx_rows is None else approx_rows @ vector
                tens += found(exact, approx, 10)
                hundreds += found(exact, approx, 200)
            size = rows.shape[0] * rows.shape[1] * (2 if approx_rows is None else 1) / 1e6
            print(f"{name:<12} | {label:<14} | {tens / len(vectors):>8.3f} | {hundreds / len(vectors):>9.3f} | {size:>16.1f}")


if __name__ == "__main__":
    main()
