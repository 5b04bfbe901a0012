"""What pinning the BLAS threads is worth: hybrid recall with one BLAS thread (what the runtime
sets) against the BLAS library's default (a thread per core), on a busy machine.

    .venv/bin/python bench/bench_threads.py [--size 10000] [--questions 300] [--load 0,1,2]

For each load (that many CPU-bound processes beside it, one per core at most is the usual
agent host), each setting runs in a fresh process (the thread count is read when numpy loads):
LoCoMo dev's turns repeated to `size` memories (bench_embed.py's graph), the vectors built, then
`ranking.recall(q, 10, vectors=...)` for LoCoMo's questions, p50 and p95. The two settings
alternate, twice each; the table gives the medians of the p50s and the ratio.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2])
import bench_embed
from soulgraph.memory import ranking
from soulgraph.store.vectors import VectorStore
graph, questions = bench_embed.conversation_graph(int(sys.argv[3]))
questions = questions[: int(sys.argv[4])]
store = VectorStore(None, background=False)
assert store.ready(graph)
for q in questions[:30]:
    ranking.recall(graph, q, 10, vectors=store)
out = []
for q in questions:
    t0 = time.perf_counter()
    ranking.recall(graph, q, 10, vectors=store)
    out.append((time.perf_counter() - t0) * 1000)
out.sort()
print(json.dumps({"p50": out[len(out) // 2], "p95": out[int(len(out) * 0.95)]}))
"""


def burn(stop) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def run(threads: str | None, size: int, questions: int) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS") and k != "VECLIB_MAXIMUM_THREADS"}
    if threads is not None:  # set explicitly: the runtime's default only fills what is unset
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"):
            env[name] = threads
    proc = subprocess.run([sys.executable, "-c", CHILD, str(REPO / "runtime"), str(REPO / "bench"), str(size),
                           str(questions)], env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"the measuring process failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--load", default="0,1,2", help="CPU-bound processes running beside it, comma separated")
    args = parser.parse_args(argv)
    cores = str(os.cpu_count() or 1)
    settings = {f"BLAS default ({cores} threads)": cores, "pinned to 1 (the runtime's)": None}
    rows = []
    for load in [int(x) for x in args.load.split(",")]:
        stop = multiprocessing.Event()
        burners = [multiprocessing.Process(target=burn, args=(stop,), daemon=True) for _ in range(load)]
        for b in burners:
            b.start()
        try:
            got: dict[str, list[dict[str, float]]] = {name: [] for name in settings}
            for _ in range(2):
                for name, threads in settings.items():
                    got[name].append(run(threads, args.size, args.questions))
        finally:
            stop.set()
            for b in burners:
                b.join(10)
        p50 = {name: statistics.median(r["p50"] for r in runs) for name, runs in got.items()}
        p95 = {name: statistics.median(r["p95"] for r in runs) for name, runs in got.items()}
        base, pinned = list(settings)
        rows.append(f"| {load} | {p50[base]:.2f} / {p95[base]:.2f} | {p50[pinned]:.2f} / {p95[pinned]:.2f} "
                    f"| x{p50[base] / p50[pinned]:.2f} |")
        print(f"  load {load} done at {time.strftime('%H:%M:%S')}", file=sys.stderr, flush=True)
    print(f"hybrid recall at {args.size:,} memories, {args.questions} LoCoMo questions, {cores} cores")
    print(f"| busy processes beside it | BLAS default ({cores} threads): p50 / p95 ms | pinned to 1: p50 / p95 ms "
          "| p50 ratio (default / pinned) |")
    print("|---:|---:|---:|---:|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
