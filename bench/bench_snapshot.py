"""How long the bounded prompt snapshot takes to build, against the structured prime's hot list.

    .venv/bin/python bench/bench_snapshot.py [--sizes 1000,10000,100000] [--repeat 200]

Synthetic graphs (bench/synthetic.py) with a mix of memory kinds: 1 in 50 nodes pinned, 1 in 20
a commitment, 1 in 20 a preference, 1 in 50 a project. Baseline, in the same run:
`graph.hot(60)`, the list `soul_prime` already returned. Target: under 2 ms at 10k nodes.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synthetic  # noqa: E402
from soulgraph.memory import snapshot  # noqa: E402


def p50(samples: list[float]) -> float:
    return sorted(samples)[len(samples) // 2]


def timed(call, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return p50(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}; p50 of {args.repeat} builds, ms")
    print(f"{'nodes':>7} | {'hot(60) ms':>10} | {'snapshot ms':>11} | {'x hot':>6} | {'chars':>5}")
    print("-" * 52)
    for size in (int(s) for s in args.sizes.split(",")):
        graph = synthetic.build(size)
        for position, node_id in enumerate(list(graph.nodes)):
            if position % 50 == 0:
                graph.pin(node_id)
            kind = ("goal_or_commitment" if position % 20 == 1 else "preference" if position % 20 == 2
                    else "project" if position % 50 == 3 else None)
            if kind:
                graph.update(node_id, kind=kind)
        hot = timed(lambda: graph.hot(60), args.repeat)
        built = timed(lambda: snapshot.render(graph), args.repeat)
        chars = len(snapshot.render(graph))
        print(f"{size:>7} | {hot * 1e3:>10.3f} | {built * 1e3:>11.3f} | {built / hot:>6.1f} | {chars:>5}", flush=True)


if __name__ == "__main__":
    main()
