"""What the vectors' full rows lose when kept in fewer bits: the share of the exact first 10 and
200 that each way of keeping them still finds, against the rows as float16 (what a store below
embeddings.TAIL_FROM keeps, and the exact reference).

    .venv/bin/python bench/row_precision.py [--size 100000] [--questions 300]

Two sets of `--size` rows, embedded by the shipped model: bench/synthetic.py's memories (the
soul the other benches serve: few distinct words, so its rows span few directions) and pairs of
LoCoMo dev turns drawn at random (bench/bench_ivf.py's: every row a distinct text of real
words). The questions are bench/synthetic.py's and LoCoMo dev's. Each way of keeping the rows
scores every row, with no shortlist (what the full rows are for: the last look at a search's
picks); a row it ranks in the first n counts as found when its exact cosine is at least the
exact n-th (ties count).

  int8            each row scaled by its largest coordinate to -127..127
  int8, centred   the rows' mean taken off first (the mean's product is the same for every
                  row, so it changes no order), then as above
  coordinates     as shipped from TAIL_FROM rows: each row's coordinates on the rows' own
                  principal directions, the shortlist's 128 as the shortlist keeps them (64
                  float32, 64 float16) and the other 256 in int8 scaled per row, scored by
                  `VectorIndex.scores` itself

MB: what the rows take as kept. The coordinates' figure holds the shortlist too, which the other
ways keep beside their rows (38.4 MB at 100,000).
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_ivf  # noqa: E402
import synthetic  # noqa: E402
from soulgraph.engine import embeddings  # noqa: E402


def int8_rows(rows, centre):
    import numpy as np

    shifted = rows - centre
    scale = np.abs(shifted).max(axis=1, keepdims=True) / 127.0
    scale[scale == 0] = 1.0
    return np.round(shifted / scale).astype(np.int8).astype(np.float32) * scale


def as_coordinates(rows):
    """An index of these rows as a store past TAIL_FROM keeps them."""
    import numpy as np

    kept, embeddings.TAIL_FROM = embeddings.TAIL_FROM, min(embeddings.TAIL_FROM or len(rows), len(rows))
    try:
        index = embeddings.VectorIndex(rows.shape[1], capacity=len(rows))
        for number, row in enumerate(rows):
            index.put(f"n{number}", row)
        index.fit_shortlist()
        assert index.matrix is None
    finally:
        embeddings.TAIL_FROM = kept
    every = np.arange(len(rows))
    return index, lambda query: index.scores(every, query)


def found(exact, approx, n):
    import numpy as np

    bar = np.partition(exact, len(exact) - n)[len(exact) - n]
    picked = np.argpartition(-approx, n)[:n]
    return float(np.mean(exact[picked] >= bar))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--questions", type=int, default=300)
    args = parser.parse_args()
    import numpy as np

    model = embeddings.default_model()
    turns, locomo_questions = bench_ivf.locomo_texts()
    random.seed(1)
    texts = {"synthetic": [node.content for node in synthetic.build(args.size).nodes.values()][: args.size],
             "LoCoMo pairs": bench_ivf.turn_pairs(turns, args.size)}
    asked = {"synthetic": synthetic.questions(args.questions), "LoCoMo dev": locomo_questions[: args.questions]}
    vectors = {name: [model.embed(q) for q in questions] for name, questions in asked.items()}
    print(f"{args.size:,} rows of {model.dimensions}; share of the exact first 10 / 200 found by the rows' own scores")
    print(f"{'rows':<12} | {'questions':<10} | {'kept as':<14} | {'first 10':>8} | {'first 200':>9} | {'MB':>6}")
    for rows_name, row_texts in texts.items():
        rows = bench_ivf.embedded(model, row_texts).astype(np.float16).astype(np.float32)  # as a store rounds them
        index, coordinate_scores = as_coordinates(rows)
        ways = {"float16": (lambda q: rows @ q, rows.size * 2),
                "int8": ((lambda kept: lambda q: kept @ q)(int8_rows(rows, 0.0)), rows.size),
                "int8, centred": ((lambda kept: lambda q: kept @ q)(int8_rows(rows, rows.mean(axis=0))), rows.size),
                "coordinates": (coordinate_scores, sum(getattr(index, name)[: len(rows)].nbytes
                                                       for name in ("shortlist", "refine", "tail", "tail_scale")))}
        for questions_name, questions in vectors.items():
            for label, (scores, size) in ways.items():
                tens = hundreds = 0.0
                for vector in questions:
                    exact, approx = rows @ vector, scores(vector)
                    tens += found(exact, approx, 10)
                    hundreds += found(exact, approx, 200)
                print(f"{rows_name:<12} | {questions_name:<10} | {label:<14} | {tens / len(questions):>8.3f} | "
                      f"{hundreds / len(questions):>9.3f} | {size / 1e6:>6.1f}")


if __name__ == "__main__":
    main()
