"""How fast the engine answers a question in-process, against today's ranking code.

    .venv/bin/python bench/bench_engine.py [--sizes 1000,10000,100000] [--questions 1000]

The baseline runs in the same invocation: `baseline_query` below is a frozen copy of
the ranking code as it was before the bitmask index (MaxScore pruning over id sets,
then a dict of lexical scores cut at the k-th best before recency is computed). It reads
only the engine's public state (`index.weighted_words`, `index.posting`, `nodes`,
`parents`, `children`, `clock`), so it keeps measuring the old algorithm while the
engine changes. Before timing, every question's answers from both are compared, and
must be identical (ids and scores, bit for bit).

Measured per graph size, per question: `query(q, 10)` and `related(q, 10)`, p50 and
p99 in µs; then the resident memory of the process after building the graph, and the
time to save (the soul_add path: `SoulFile.change`) and load the soul file.
"""

from __future__ import annotations

import argparse
import gc
import heapq
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synthetic  # noqa: E402
from soulgraph.engine.graph import CHILD_SHARE, PARENT_SHARE, SoulGraph  # noqa: E402
from soulgraph.engine.index import words  # noqa: E402
import soulgraph.memory  # noqa: E402,F401  the write guard, as every writer installs it
from soulgraph.store import SoulFile  # noqa: E402


# ----------------------------------------------------------------- the frozen baseline
def _baseline_top(graph: SoulGraph, lexical: dict[str, float], k: int, weight: float) -> list[tuple[str, float]]:
    nodes = graph.nodes
    if k <= 0 or not lexical:
        return []
    by_score = lambda pair: (-pair[0], pair[1])  # noqa: E731
    if not weight:
        best = heapq.nsmallest(k, ((score, i) for i, score in lexical.items()), key=by_score)
        return [(i, score) for score, i in best]
    pool = lexical.items()
    if len(lexical) > k:
        kth_lexical = heapq.nlargest(k, lexical.values())[-1]
        cutoff = kth_lexical / (1.0 + weight) * (1 - 1e-12)
        pool = [(i, s) for i, s in lexical.items() if s >= cutoff]
    now = graph.clock()

    def boost(node_id: str) -> float:
        score = nodes[node_id].recency_score(now)
        return 1.0 + weight * score / (1.0 + score)

    finals = ((score * boost(i), i) for i, score in pool)
    return [(i, score) for score, i in heapq.nsmallest(k, finals, key=by_score)]


def baseline_query(graph: SoulGraph, text: str, k: int, weight: float) -> list[tuple[str, float]]:
    """`SoulGraph.query(text, k)` as it was: MaxScore over id sets, then `_top`."""
    index = graph.index
    weighted = index.weighted_words(words(text))
    if not weighted or k <= 0:
        return []
    suffix = [sum(idf for idf, _ in weighted[position:]) for position in range(len(weighted))]
    max_boost = 1.0 + weight
    scores: dict[str, float] = {}
    for position, (idf, word) in enumerate(weighted):
        if position and len(scores) >= k:
            kth_lexical = heapq.nlargest(k, scores.values())[-1]
            if suffix[position] * max_boost * (1 + 1e-9) < kth_lexical:
                for idf2, word2 in weighted[position:]:
                    posting = index.posting(word2)
                    if len(posting) < len(scores):
                        for node_id in posting:
                            if node_id in scores:
                                scores[node_id] += idf2
                    else:
                        for node_id in scores:
                            if node_id in posting:
                                scores[node_id] += idf2
                break
        for node_id in index.posting(word):
            scores[node_id] = scores.get(node_id, 0.0) + idf
    return _baseline_top(graph, scores, k, weight)


def baseline_related(graph: SoulGraph, text: str, k: int, weight: float) -> list[tuple[str, float, str]]:
    """`SoulGraph.related(text, k)` as it was, over `baseline_query`."""
    hits = baseline_query(graph, text, k, weight)
    best = {node_id: (node_id, score, "match") for node_id, score in hits}
    for node_id, hit_score in hits:
        for share, neighbours, relation in ((PARENT_SHARE, graph.parents, "parent"), (CHILD_SHARE, graph.children, "child")):
            for other in neighbours[node_id]:
                score = hit_score * share
                if other not in best or best[other][1] < score:
                    best[other] = (other, score, f"{relation} of {node_id}")
    return sorted(best.values(), key=lambda h: (-h[1], h[0]))[:k]


# ----------------------------------------------------------------- measuring
def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def rss_mb() -> float:
    """Resident set size now (Linux /proc), in MB."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize() / 1e6


def time_each(function, questions: list[str], repeat: int = 3) -> list[float]:
    """Per-question seconds: the best of `repeat` runs of each question (less scheduler noise)."""
    samples = []
    clock = time.perf_counter
    for q in questions:
        best = float("inf")
        for _ in range(repeat):
            started = clock()
            function(q)
            best = min(best, clock() - started)
        samples.append(best)
    return samples


def check_identical(graph: SoulGraph, questions: list[str]) -> None:
    """Both implementations must give the same answers, bit for bit, before any timing."""
    for weight in (graph.recency_weight, 0.0, 2.0):
        for q in questions:
            for k in (1, 10):
                new = [(h.node.id, h.score) for h in graph.query(q, k, recency_weight=weight)]
                old = baseline_query(graph, q, k, weight)
                assert new == old, (q, k, weight, new, old)
    for q in questions:
        new = [(h.node.id, h.score, h.via) for h in graph.related(q, 10)]
        assert new == baseline_related(graph, q, 10, graph.recency_weight), q


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.0f}" if seconds >= 1e-4 else f"{seconds * 1e6:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--no-files", action="store_true", help="skip the soul file save/load rows")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    questions = synthetic.questions(args.questions)
    work = Path(tempfile.mkdtemp(prefix="soulbench-engine-"))
    print(f"python {sys.version.split()[0]}; {len(questions)} questions of 3-8 Zipf words; k = 10; "
          f"µs per question, best of 3 runs each")
    header = (f"{'nodes':>7} | {'query p50/p99 new':>17} | {'query p50/p99 old':>17} | {'x p50':>5} {'x p99':>5} | "
              f"{'related p50/p99 new':>19} | {'related p50/p99 old':>19} | {'RSS MB':>6} | {'build s':>7}")
    print(header)
    print("-" * len(header))
    file_rows = []
    for size in sizes:
        gc.collect()
        rss_before = rss_mb()
        started = time.perf_counter()
        graph = synthetic.build(size)
        build_seconds = time.perf_counter() - started
        gc.collect()
        rss_graph = rss_mb() - rss_before
        check_identical(graph, questions)
        weight = graph.recency_weight
        new_q = time_each(lambda q: graph.query(q, 10), questions)
        old_q = time_each(lambda q: baseline_query(graph, q, 10, weight), questions)
        new_r = time_each(lambda q: graph.related(q, 10), questions)
        old_r = time_each(lambda q: baseline_related(graph, q, 10, weight), questions)
        pair = lambda s: f"{us(percentile(s, 0.5))}/{us(percentile(s, 0.99))}"  # noqa: E731
        print(f"{size:>7} | {pair(new_q):>17} | {pair(old_q):>17} | "
              f"{percentile(old_q, 0.5) / percentile(new_q, 0.5):>5.1f} {percentile(old_q, 0.99) / percentile(new_q, 0.99):>5.1f} | "
              f"{pair(new_r):>19} | {pair(old_r):>19} | {rss_graph:>6.0f} | {build_seconds:>7.2f}", flush=True)
        if not args.no_files:
            file_rows.append((size, *measure_file(graph, work / f"soul-{size}.json", questions)))
        del graph
    if file_rows:
        print()
        header = f"{'nodes':>7} | {'file MB':>7} | {'first save s':>12} | {'soul_add save p50/p99 ms':>24} | {'load s':>6}"
        print(header)
        print("-" * len(header))
        for size, mb, first, add50, add99, load in file_rows:
            print(f"{size:>7} | {mb:>7.1f} | {first:>12.2f} | {f'{add50 * 1e3:.1f}/{add99 * 1e3:.1f}':>24} | {load:>6.2f}")


def measure_file(graph: SoulGraph, path: Path, questions: list[str]) -> tuple[float, float, float, float, float]:
    """First save; then 50 soul_add-like changes (add a node under the lock, saved); then a cold load."""
    started = time.perf_counter()
    soul = SoulFile(path, clock=graph.clock)
    soul.save(graph)
    first = time.perf_counter() - started
    adds = []
    for q in questions[:50]:
        started = time.perf_counter()
        with soul.change() as changing:
            changing.add(q, ["bench"])
        adds.append(time.perf_counter() - started)
    started = time.perf_counter()
    SoulFile(path, clock=graph.clock).graph()
    load = time.perf_counter() - started
    return path.stat().st_size / 1e6, first, percentile(adds, 0.5), percentile(adds, 0.99), load


if __name__ == "__main__":
    main()
