"""Would a graph index (HNSW) make the vectors' part of a hybrid question cheaper? (issue 15)

Not a dependency of soulfleet: this script measures one, usearch (Apache-2.0, a compiled wheel
with its SIMD kernels in numkong), against the shortlist engine/embeddings.py ships, on the same
index and questions, in the same run. Install it beside the tree, never into the project's venv:

    .venv/bin/pip install --target /tmp/usearch usearch
    PYTHONPATH=/tmp/usearch .venv/bin/python bench/hnsw_trial.py [--size 10000] [--questions 500]

The graph is bench_embed.py's (LoCoMo dev's turns repeated to the size, each a child of its
session), the questions LoCoMo's; each is asked for its 200 nearest (what recall fuses), one
thread. "found" is the share of the exact first n that a search returns, a place won on a tie
(copies of one text have equal cosines) counting as found when the tie is.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "runtime"))

import numpy as np  # noqa: E402

from bench_embed import conversation_graph, p, timed  # noqa: E402
from soulgraph.memory import ranking  # noqa: E402
from soulgraph.store.vectors import VectorStore  # noqa: E402

SETTINGS = [  # (dtype, connectivity, expansion at search)
    ("f32", 16, 200), ("f32", 16, 400),
    ("f16", 16, 200), ("f16", 16, 400),
    ("i8", 16, 200), ("i8", 16, 400),
]


def found(exact: np.ndarray, picked: list[int], n: int) -> float:
    bar = np.partition(exact, len(exact) - n)[len(exact) - n]
    return float(np.mean(exact[picked[:n]] >= bar - 1e-6))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--questions", type=int, default=500)
    args = parser.parse_args()
    try:
        from usearch.index import Index
    except ImportError:
        sys.exit("usearch is not importable: see this script's docstring for where to install it")
    graph, questions = conversation_graph(args.size)
    questions = questions[: args.questions]
    store = VectorStore(None, background=False)
    assert store.ready(graph)
    index = store.index
    used = len(index.id_of)
    depth = ranking.FUSION_DEPTH
    vectors = {q: store.question_vector(q) for q in questions}
    exact = {q: index.matrix[:used] @ vectors[q] for q in questions}

    def quality(search) -> tuple[float, float]:
        results = [search(q) for q in questions]
        return (float(np.mean([found(exact[q], r, 10) for q, r in zip(questions, results)])),
                float(np.mean([found(exact[q], r, depth) for q, r in zip(questions, results)])))

    rows = []
    # Rows, as the graph index answers: the ids that recall maps them to cost both the same.
    shortlist = lambda q: index._nearest_rows(vectors[q], depth)[0].tolist()  # noqa: E731
    rows.append(("shortlist (shipped): 128 dims, 600 picks", "-", p(timed(shortlist, questions), .5), *quality(shortlist)))
    matrix = np.ascontiguousarray(index.matrix[:used])
    for dtype, connectivity, expansion in SETTINGS:
        t0 = time.perf_counter()
        graph_index = Index(ndim=index.dimensions, metric="ip", dtype=dtype, connectivity=connectivity)
        graph_index.add(np.arange(used), matrix, threads=1)
        built = time.perf_counter() - t0
        graph_index.expansion_search = expansion

        def hnsw(q: str, graph_index=graph_index) -> list[int]:
            return graph_index.search(vectors[q], depth, threads=1).keys.tolist()

        rows.append((f"HNSW {dtype}, M {connectivity}, ef {expansion}", f"{built:.1f} s", p(timed(hnsw, questions), .5),
                     *quality(hnsw)))
    base = rows[0][2]
    print(f"the {depth} nearest of {used:,} memories, {len(questions)} LoCoMo questions, one thread:")
    print("| search | build | p50 | vs shortlist | found of exact first 10 | found of exact first 200 |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, built, p50, ten, deep in rows:
        print(f"| {name} | {built} | {p50 * 1000:.3f} ms | {p50 / base:.2f}x | {ten:.3f} | {deep:.3f} |")


if __name__ == "__main__":
    main()
