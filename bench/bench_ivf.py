"""The vector search's cells (the inverted file, issue 31) against the shortlist read whole and
the exact search, on the same index, in one run:

    .venv/bin/python bench/bench_ivf.py [--sizes 10000,100000] [--questions 300] [--probed 0.35]

The rows are LoCoMo dev's turns embedded by the static model and repeated until the index has
the size asked for (as bench/bench_embed.py's conversation graph repeats them: 2,760 texts, so
at 100,000 rows each is there 36 times); then, every row a distinct text, two turns drawn at
random one after the other; then random unit vectors. The queries are LoCoMo's questions embedded (random unit vectors for
the second table). Each query asks for 200 rows, as hybrid recall does (ranking.FUSION_DEPTH):

  exact      every full row scored (the reference the overlaps are measured against)
  one pass   every row's 128 shortlist coordinates, then 600 picks on their full rows (what a
             store below LEAD_FROM rows does; the shipped search before the two steps)
  shortlist  as shipped, without cells: from LEAD_FROM rows, every row's 64 leading
             coordinates, 2,000 picks completed with the other 64, then 600 on their full rows
  cells      the rows of the nearest cells only, then as the shortlist
  coordinates  the shortlist from rows kept as their coordinates on every direction, int8 past
             the shortlist's (what a store from embeddings.TAIL_FROM rows keeps): as shipped at
             100,000; the other modes keep the full rows, as a store below TAIL_FROM does

`top 10` / `top 200`: the share of the exact first 10 / 200 found among the same number returned
(a row with the same cosine as one of them counts: the repeated turns tie).
`fit`: fit_shortlist (directions and cells, what a load runs) and the cells alone. The BLAS threads
are the product's own (one: soulgraph.engine.embeddings sets it when imported, before numpy)."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "runtime"))

from soulgraph.engine import embeddings  # noqa: E402  (first: pins the BLAS threads)
from soulgraph.eval.ledger import LedgerProblems  # noqa: E402
from soulgraph.eval.locomo import _sessions, read_locomo, turn_text  # noqa: E402

import numpy as np  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
WANTED = 200


def locomo_texts() -> tuple[list[str], list[str]]:
    turns, questions = [], []
    for number, sample in enumerate(read_locomo(DATA)):
        for _session, _start, _date, session_turns in _sessions(sample["conversation"], LedgerProblems(), str(number)):
            turns += [turn_text(t) for t in session_turns if isinstance(t, dict)]
        questions += [qa["question"] for qa in sample.get("qa") or [] if isinstance(qa.get("question"), str)]
    return turns, questions


def embedded(model, texts) -> np.ndarray:
    return np.stack([model.embed(t) for t in texts]).astype(np.float32)


def turn_pairs(turns: list[str], count: int) -> list[str]:
    """`count` distinct texts of real words: two LoCoMo turns, drawn at random, one after the other."""
    rng = np.random.default_rng(4)
    firsts, seconds = rng.integers(len(turns), size=count), rng.integers(len(turns), size=count)
    return [f"{turns[a]} {turns[b]}" for a, b in zip(firsts.tolist(), seconds.tolist())]


def random_units(count: int, dimensions: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((count, dimensions)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


SHORTLIST_PARTS = ("basis", "shortlist", "refine")


def filled(rows: np.ndarray, size: int) -> embeddings.VectorIndex:
    index = embeddings.VectorIndex(rows.shape[1], capacity=size)
    for number in range(size):
        index.put(f"n{number}", rows[number % len(rows)])
    return index


def build(rows: np.ndarray, size: int) -> tuple[embeddings.VectorIndex, float, float]:
    """The index with its full rows (the reference and the older modes read them), and beside it
    (`index.coordinates`) the same rows as a store past TAIL_FROM keeps them: same ids, same rows."""
    shipped_tail, embeddings.TAIL_FROM = embeddings.TAIL_FROM, None
    index = filled(rows, size)
    shipped_from, embeddings.LEAD_FROM = embeddings.LEAD_FROM, size + 1
    index.fit_shortlist()  # every coordinate in one pass, kept for the "one pass" mode
    index.one_pass = [getattr(index, name) for name in SHORTLIST_PARTS]
    embeddings.LEAD_FROM = shipped_from
    t0 = time.perf_counter()
    index.fit_shortlist()
    fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    index.fit_cells()
    cells = time.perf_counter() - t0
    embeddings.TAIL_FROM = shipped_tail
    index.coordinates = filled(rows, size)
    index.coordinates.fit_shortlist()
    return index, fit, cells


def exact(index, query, n):
    scores = index.matrix[: len(index.id_of)] @ query
    top = np.argpartition(scores, len(scores) - n)[len(scores) - n:]
    return top[np.argsort(-scores[top], kind="stable")]


def share(got: np.ndarray, truth: np.ndarray) -> float:
    """The share of the exact first len(truth) found among `got` (their exact cosines), ties
    counted as found: repeated turns give many rows one cosine, and which of them is "first"
    is only an order of rows."""
    return min(len(truth), int(np.sum(got >= truth[-1] - 1e-6))) / len(truth)


def measure(index, queries) -> dict[str, dict[str, float]]:
    centres, cell_of, cell_rows = index.centres, index.cell_of, index.cell_rows
    without = lambda q, n: (setattr(index, "centres", None), index._nearest_rows(q, n)[0], setattr(index, "centres", centres))[1]  # noqa: E731
    shipped = [getattr(index, name) for name in SHORTLIST_PARTS]

    def one_pass(query, n):
        for name, value in zip(SHORTLIST_PARTS, index.one_pass):
            setattr(index, name, value)
        try:
            return without(query, n)
        finally:
            for name, value in zip(SHORTLIST_PARTS, shipped):
                setattr(index, name, value)

    coordinates = index.coordinates
    coordinates.centres = None
    modes = {"exact": lambda q, n: exact(index, q, n), "one pass": one_pass, "shortlist": without,
             "cells": lambda q, n: index._nearest_rows(q, n)[0], "coordinates": lambda q, n: coordinates._nearest_rows(q, n)[0]}
    times = {name: [] for name in modes}
    found = {name: [] for name in modes}
    for query in queries:
        truth = exact(index, query, WANTED)
        exact_scores = index.matrix[: len(index.id_of)] @ query
        for name, call in modes.items():  # in turn on one query, so load drifts hit all alike
            t0 = time.perf_counter()
            call(query, WANTED)
            times[name].append(time.perf_counter() - t0)
            got = index.matrix[call(query, WANTED)] @ query
            found[name].append((share(got[:10], exact_scores[truth[:10]]), share(got, exact_scores[truth])))
    index.centres, index.cell_of, index.cell_rows = centres, cell_of, cell_rows
    out = {}
    for name in modes:
        ms = sorted(t * 1000 for t in times[name])
        out[name] = {"p50": statistics.median(ms), "p95": ms[int(0.95 * (len(ms) - 1))],
                     "top10": float(np.mean([f[0] for f in found[name]])),
                     "top200": float(np.mean([f[1] for f in found[name]]))}
    return out


def table(title: str, rows: np.ndarray, queries: np.ndarray, sizes: list[int]) -> None:
    print(f"\n{title}")
    print(f"{'rows':>7} {'search':<10} {'p50 ms':>7} {'p95 ms':>7} {'vs exact':>8} {'vs shortlist':>12} {'top 10':>7} {'top 200':>7}")
    for size in sizes:
        index, fit, cells = build(rows, size)
        result = measure(index, queries)
        for name, r in result.items():
            print(f"{size:>7} {name:<10} {r['p50']:>7.3f} {r['p95']:>7.3f} {r['p50'] / result['exact']['p50']:>7.2f}x"
                  f" {r['p50'] / result['shortlist']['p50']:>11.2f}x {r['top10']:>7.3f} {r['top200']:>7.3f}")
        held = lambda ix: sum(getattr(ix, name).nbytes for name in ("matrix", "shortlist", "refine", "tail", "tail_scale")  # noqa: E731
                              if getattr(ix, name) is not None) / 1e6
        print(f"{size:>7} fit: directions and cells {fit * 1000:.0f} ms, cells alone {cells * 1000:.0f} ms"
              f" ({len(index.cell_rows)} cells); rows and shortlist {held(index):.1f} MB, as coordinates"
              f" {held(index.coordinates):.1f} MB ({'kept' if index.coordinates.matrix is None else 'not kept: below TAIL_FROM'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--probed", type=float, default=embeddings.CELLS_PROBED_SHARE,
                        help="share of the cells a search reads")
    args = parser.parse_args()
    embeddings.CELLS_FROM = 0  # the product leaves the cells off; here every index measured has them
    embeddings.CELLS_PROBED_SHARE = args.probed
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"BLAS threads: OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}; "
          f"cells: about sqrt(rows), {embeddings.CELLS_PROBED_SHARE:.0%} of them read by a search")
    model = embeddings.default_model()
    turn_texts, question_texts = locomo_texts()
    turns = embedded(model, turn_texts)
    questions = embedded(model, question_texts)[np.random.default_rng(1).permutation(len(question_texts))[: args.questions]]
    table(f"LoCoMo dev turns ({len(turns)} distinct, repeated), {len(questions)} LoCoMo questions", turns, questions, sizes)
    table(f"pairs of LoCoMo turns (every row a distinct text), {len(questions)} LoCoMo questions",
          embedded(model, turn_pairs(turn_texts, max(sizes))), questions, sizes)
    dimensions = turns.shape[1]
    table(f"random unit vectors, {args.questions} random queries", random_units(max(sizes), dimensions, 2),
          random_units(args.questions, dimensions, 3), sizes)


if __name__ == "__main__":
    main()
