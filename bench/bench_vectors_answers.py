"""What a change to the vector index does to search: the answers and the time, against a base commit.

    python bench/bench_vectors_answers.py --base c16575a [--sizes 10000,100000] [--rounds 3]

The graph and questions are bench_embed.py's (LoCoMo dev's turns repeated to the size, its first
500 questions). Each tree (this one and the base, a temporary worktree) runs in fresh processes:
one per size saves its answers, the ids of the vectors' first 10 and 200 for every question (a
store embedded in that process, and the same store saved and read back from its file), and the
share of the exact first 10 / 200 the index returns (a place won on a tie counted as found);
then `--rounds` alternating pairs time the vectors' 200 nearest and a hybrid recall (p50).
The answers are compared by id and by text: the graph repeats each turn, so copies of one text
have equal vectors, and which copy comes first may differ where the texts do not.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def answers(size: int, out: Path) -> None:
    import numpy as np

    import bench_embed  # its runtime: BENCH_RUNTIME
    from soulgraph.store.vectors import VectorStore

    graph, questions = bench_embed.conversation_graph(size)
    questions = questions[:500]
    result: dict = {}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "soul.json.vectors"
        store = VectorStore(path, background=False)
        assert store.ready(graph)
        store.save()
        again = VectorStore(path, background=False)
        assert again.ready(graph) and again.loaded_from == "file"
    for name, each in (("embedded", store), ("read back", again)):
        result[name] = {str(n): [each.nearest_ids(q, n) for q in questions] for n in (10, 200)}
    index = again.index
    used = len(index.id_of)
    rows = np.asarray(index.matrix[:used], np.float32)
    found: dict[int, list[float]] = {10: [], 200: []}
    for q in questions:
        vector = again.question_vector(q)
        exact = rows @ vector
        picked = [index.row_of[i] for i, _ in index.nearest(vector, 200)]
        for n in found:
            bar = np.partition(exact, used - n)[used - n]
            found[n].append(float(np.mean(exact[picked[:n]] >= bar - 1e-6)))
    result["found"] = {str(n): float(np.mean(v)) for n, v in found.items()}
    result["texts"] = {node_id: graph.nodes[node_id].content
                       for name in ("embedded", "read back") for n in ("10", "200")
                       for ranked in result[name][n] for node_id in ranked}  # a search for 10 may find one the 200 miss
    out.write_text(json.dumps(result))


def timings(size: int) -> dict[str, float]:
    import bench_embed
    from soulgraph.memory import ranking
    from soulgraph.store.vectors import VectorStore

    graph, questions = bench_embed.conversation_graph(size)
    questions = questions[:500]
    store = VectorStore(None, background=False)
    assert store.ready(graph)
    for q in questions[:50]:
        ranking.recall(graph, q, 10, vectors=store)

    def p50(call) -> float:
        spent = []
        for q in questions:
            began = time.perf_counter()
            call(q)
            spent.append(time.perf_counter() - began)
        return statistics.median(spent) * 1000

    return {"nearest 200": p50(lambda q: store.nearest_ids(q, 200)),
            "hybrid recall": p50(lambda q: ranking.recall(graph, q, 10, vectors=store))}


def run(runtime: Path, *args: str) -> str:
    env = {**os.environ, "BENCH_RUNTIME": str(runtime)}
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env,
                          timeout=1800, check=True)
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def compare(base: dict, here: dict, size: int) -> list[str]:
    texts = {**base["texts"], **here["texts"]}
    lines = []
    for left, right in (("read back", "read back"), ("embedded", "embedded")):
        for n in ("10", "200"):
            a, b = base[left][n], here[right][n]
            ids = sum(x == y for x, y in zip(a, b))
            ordered = sum([texts[i] for i in x] == [texts[i] for i in y] for x, y in zip(a, b))
            same = sum(sorted(texts[i] for i in x) == sorted(texts[i] for i in y) for x, y in zip(a, b))
            lines.append(f"| {size:,} | {left} | {n} | {ids}/{len(a)} | {ordered}/{len(a)} | {same}/{len(a)} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="the commit to compare with")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--answers", type=Path, help=argparse.SUPPRESS)  # a child: save the answers there
    parser.add_argument("--timings", action="store_true", help=argparse.SUPPRESS)  # a child: print timings
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    sys.path.insert(0, str(HERE))
    if args.answers:
        answers(sizes[0], args.answers)
        return
    if args.timings:
        print(json.dumps(timings(sizes[0])))
        return
    from revisions import worktree

    with worktree(args.base) as tree, tempfile.TemporaryDirectory() as folder:
        assert tree is not None, "--base is needed"
        trees = {"base": tree / "runtime", "here": REPO / "runtime"}
        table = ["| memories | vectors | first | same ids | same texts, same order | same texts |", "|---:|---|---:|---:|---:|---:|"]
        found = []
        for size in sizes:
            got = {}
            for name, runtime in trees.items():
                out = Path(folder) / f"{name}-{size}.json"
                run(runtime, "--sizes", str(size), "--answers", str(out))
                got[name] = json.loads(out.read_text())
            table += compare(got["base"], got["here"], size)
            found.append(f"{size:,}: " + ", ".join(
                f"{name} {got[name]['found']['10']:.3f} / {got[name]['found']['200']:.3f}" for name in trees))
        print(f"answers at {args.base[:12]} against this tree (base / here):")
        print("\n".join(table))
        print("\nshare of the exact first 10 / 200 found: " + "; ".join(found))
        print(f"\np50 ms, fresh processes alternating, {args.rounds} rounds (each value: the median of the rounds):")
        print("| memories | nearest 200, base | here | hybrid recall, base | here |")
        print("|---:|---:|---:|---:|---:|")
        for size in sizes:
            runs: dict[str, list[dict]] = {name: [] for name in trees}
            for _ in range(args.rounds):
                for name, runtime in trees.items():
                    runs[name].append(json.loads(run(runtime, "--sizes", str(size), "--timings")))
            mid = {name: {key: statistics.median(r[key] for r in runs[name]) for key in runs[name][0]} for name in trees}
            print(f"| {size:,} | {mid['base']['nearest 200']:.2f} | {mid['here']['nearest 200']:.2f} "
                  f"| {mid['base']['hybrid recall']:.2f} | {mid['here']['hybrid recall']:.2f} |")


if __name__ == "__main__":
    main()
