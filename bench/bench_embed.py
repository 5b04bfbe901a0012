"""What the vectors cost (issue 15): a question's recall, a new memory's vector, memory, start-up.

    .venv/bin/python bench/bench_embed.py [--sizes 1000,10000] [--questions 500] [--base 0b70e26]
                                          [--recall-base 887a219]

The graph is LoCoMo dev's turns (../shared/data/locomo/locomo-dev.json), each a child of its
session node, repeated with a copy number until it has the size asked for; the questions are
LoCoMo's own. Measured in one process, one thread (OMP/BLAS pinned to one), per size:

  recall (baseline)   ranking.recall(q, 10, neighbours=False, time_aware=False): recall before issue 15
  recall (lexical)    ranking.recall(q, 10): + neighbour context and time-aware questions
  recall (hybrid)     ranking.recall(q, 10, vectors=...): + the question embedded and the vectors
                      fused in (every LoCoMo question is a question, so every one pays for them)
  embed per memory    VectorStore catching up with one new memory: its vector made and stored
  vectors: build / load   every memory embedded / the vectors file read back
  memory              resident memory added by the vectors, per node (the model's own, once, apart)
Then what the shortlist changes (engine/embeddings.py: its nearest against the exact ones at the
largest size, and LoCoMo dev's recall with it used at every size), the steps of one hybrid
recall, each timed alone, at the largest size, and the vectors' part and the rest of recall timed
apart and together (what they cost each other through the caches), and the floor: the word
search and the vectors' part alone, summed per question (what no ranking on top of them can undercut).
Start-up: importing the MCP server's module must not import numpy (the vectors load on first use);
with --base <sha> its import time is compared with that commit's, in the same invocation.
With --recall-base <sha> (a commit that has the vectors), the three recalls' p50 are compared with
that commit's: each tree measured in a fresh process, alternating, twice.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from revisions import worktree  # bench/: a temporary checkout of a revision
from typing import Callable

# The BLAS threads are the product's own: soulgraph.engine.embeddings pins them to one when it is
# imported (before numpy), as in the server and the memory service.

REPO = Path(__file__).resolve().parent.parent
# --base runs this script again on another commit's runtime (a worktree), named here.
sys.path.insert(0, os.environ.get("BENCH_RUNTIME") or str(REPO / "runtime"))

from soulgraph.engine import embeddings, hybrid, when  # noqa: E402
from soulgraph.engine.graph import SoulGraph  # noqa: E402
from soulgraph.engine.index import words  # noqa: E402
from soulgraph.eval.ledger import LedgerProblems  # noqa: E402
from soulgraph.eval.locomo import _sessions, read_locomo, turn_text  # noqa: E402
from soulgraph.memory import ranking  # noqa: E402
from soulgraph.store.vectors import VectorStore  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "locomo" / "locomo-dev.json"


def conversation_graph(size: int) -> tuple[SoulGraph, list[str]]:
    data = read_locomo(DATA)
    sessions = []
    questions = []
    for number, sample in enumerate(data):
        for session, start, _date, turns in _sessions(sample["conversation"], LedgerProblems(), str(number)):
            sessions.append((f"{number}-{session}", start, [turn_text(t) for t in turns if isinstance(t, dict)]))
        questions += [qa["question"] for qa in sample.get("qa") or [] if isinstance(qa.get("question"), str)]
    clock = [0.0]
    graph = SoulGraph(clock=lambda: clock[0])
    copy = 0
    while len(graph) < size:
        for name, start, turns in sessions:
            if len(graph) >= size:
                break
            at = start + copy * 5e7
            session = graph.add(f"Session {name} (copy {copy})", ["session"], created_at=at)
            for offset, text in enumerate(turns[: size - len(graph)], 1):
                graph.add(text, parents=[session.id], created_at=at + offset)
            clock[0] = max(clock[0], at + len(turns))
        copy += 1
    return graph, questions


def timed(call, items) -> list[float]:
    out = []
    for item in items:
        t0 = time.perf_counter()
        call(item)
        out.append(time.perf_counter() - t0)
    return out


def in_turn(calls: dict[str, Callable[[str], object]], questions: list[str]) -> dict[str, list[float]]:
    """Each call's time on each question, the calls taken in turn on one question before the next,
    so all of them see the machine as it is at that moment (this one's speed drifts)."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for q in questions:
        for name, call in calls.items():
            times[name] += timed(call, [q])
    return times


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def import_ms(runtime: Path) -> tuple[float, bool]:
    """Milliseconds to import the MCP server's module from `runtime`, and whether numpy came with it."""
    code = ("import sys, time; t = time.perf_counter(); import soulgraph.server.app; "
            "print((time.perf_counter() - t) * 1000, 'numpy' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": str(runtime)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env,
                         check=True).stdout.split()
    return float(out[0]), out[1] == "True"


def startup(base: str | None, tree: Path | None) -> str:
    """Import time of the server module, this tree against `base`'s, alternating, 5 each."""
    if tree is None:
        runs = [import_ms(REPO / "runtime") for _ in range(5)]
        return f"{statistics.median(r[0] for r in runs):.0f} ms (numpy imported: {any(r[1] for r in runs)})"
    ours, theirs = [], []
    for _ in range(5):
        ours.append(import_ms(REPO / "runtime"))
        theirs.append(import_ms(tree / "runtime"))
    a, b = statistics.median(r[0] for r in ours), statistics.median(r[0] for r in theirs)
    return (f"{a:.0f} ms here, {b:.0f} ms at {base[:12]} ({a / b:.2f}x); numpy imported: "
            f"{any(r[1] for r in ours)}")


def recall_p50s(sizes: list[int], count: int) -> dict[int, dict[str, float]]:
    """p50 ms of baseline, lexical and hybrid recall per size: what --recall-only prints, through
    calls every commit since issue 15 has, so it runs on an older runtime as well."""
    out = {}
    for size in sizes:
        graph, questions = conversation_graph(size)
        questions = questions[:count]
        store = VectorStore(None, background=False)
        assert store.ready(graph)
        for q in questions[:50]:
            ranking.recall(graph, q, 10, vectors=store)
        out[size] = {
            "baseline": p(timed(lambda q: ranking.recall(graph, q, 10, neighbours=False, time_aware=False),
                                questions), .5) * 1000,
            "lexical": p(timed(lambda q: ranking.recall(graph, q, 10), questions), .5) * 1000,
            "hybrid": p(timed(lambda q: ranking.recall(graph, q, 10, vectors=store), questions), .5) * 1000,
        }
    return out


def against_base(base: str, tree: Path, sizes: list[int], count: int) -> str:
    """Recall p50s here and at `base`, each in a fresh process, alternating, two rounds; medians."""
    runs: dict[str, list[dict]] = {"here": [], "base": []}
    for _ in range(2):
        for name, runtime in (("here", REPO / "runtime"), ("base", tree / "runtime")):
            env = {**os.environ, "BENCH_RUNTIME": str(runtime)}
            done = subprocess.run([sys.executable, __file__, "--recall-only", "--sizes", ",".join(map(str, sizes)),
                                   "--questions", str(count)], capture_output=True, text=True, env=env,
                                  timeout=1800, check=True)
            runs[name].append({int(k): v for k, v in json.loads(done.stdout.splitlines()[-1]).items()})
    lines = [f"| nodes | hybrid p50 here | at {base[:12]} | ratio | lexical here / there | baseline here / there |",
             "|---:|---:|---:|---:|---:|---:|"]
    for size in sizes:
        mid = {name: {key: statistics.median(run[size][key] for run in runs[name])
                      for key in ("baseline", "lexical", "hybrid")} for name in runs}
        here, there = mid["here"], mid["base"]
        lines.append(f"| {size:,} | {here['hybrid']:.2f} ms | {there['hybrid']:.2f} ms | "
                     f"{here['hybrid'] / there['hybrid']:.2f}x | {here['lexical']:.2f} / {there['lexical']:.2f} ms | "
                     f"{here['baseline']:.2f} / {there['baseline']:.2f} ms |")
    return "\n".join(lines)


def full_rows(graph: SoulGraph, store: VectorStore):
    """Every row's vector in full (float16, as a store rounds it), for the exact reference: the
    index's own rows, or, past embeddings.TAIL_FROM where it keeps their coordinates instead,
    each memory embedded again (the model is deterministic: the vector the store made)."""
    import numpy as np

    index = store.index
    used = len(index.id_of)
    if index.matrix is not None:
        return index.matrix[:used]
    rows = np.zeros((used, index.dimensions), np.float16)
    for node_id, row in index.row_of.items():
        rows[row] = store.model.embed_ids(store.model.token_ids(graph.nodes[node_id].content))
    return rows


def where_the_time_goes(graph: SoulGraph, store: VectorStore, questions: list[str]) -> dict[str, list[float]]:
    """The steps of a hybrid recall (memory/ranking.py::_hybrid), each timed on its own."""
    every = lambda node_id: True  # noqa: E731 - no filter, as a plain soul_query
    depth = ranking.pool(10)
    nearest = {q: store.nearest_ids(q, ranking.FUSION_DEPTH, every) for q in questions}
    hits = {q: graph.query(q, depth) for q in questions}
    known = {q: {hit.node.id for hit in hits[q]} for q in questions}
    pooled = {q: {**{hit.node.id: hit.score for hit in hits[q]},
                  **graph.scores_of(q, [i for i in nearest[q] if i not in known[q]])} for q in questions}
    ranked = {q: ranking.recall(graph, q, depth, vectors=store, mmr_lambda=1.0) for q in questions}
    index = store.index
    used = len(index.id_of)
    vectors = {q: store.question_vector(q) for q in questions}
    whole_rows = full_rows(graph, store)
    return {
        f"word search, {depth} deep": timed(lambda q: graph.query(q, depth), questions),
        "question's vector (two weightings)": timed(store.question_vector, questions),
        f"vectors' {ranking.FUSION_DEPTH} nearest (vector included)": timed(
            lambda q: store.nearest_ids(q, ranking.FUSION_DEPTH, every), questions),
        "  of which the shortlist's product": timed(
            lambda q: index.shortlist[:used] @ (vectors[q] @ index.basis), questions)
        if index.shortlist is not None else [0.0],
        "  (the product over whole rows it saves)": timed(lambda q: whole_rows @ vectors[q], questions),
        "their word scores (scores_of)": timed(
            lambda q: graph.scores_of(q, [i for i in nearest[q] if i not in known[q]]), questions),
        "neighbours, fusion, date over the pooled candidates": timed(
            lambda q: hybrid.rerank(graph, pooled[q], depth, accept=lambda n: True, nearest=nearest[q],
                                    span=when.window(q, graph.clock())), questions),
        "variety (MMR) over the 15": timed(lambda q: ranking.diversify(
            ranked[q], 10, ranking.MMR_LAMBDA, frozenset(words(q))), questions),
    }


class _Answered:
    """Vectors whose answers were computed beforehand: recall with them costs everything but the vectors."""

    def __init__(self, store: VectorStore, answers: dict[str, list[str]]):
        self.answers = answers
        self.index = store.index  # the reranker reads its candidates' cosines from the rows
        self.questions = {text: store.question_vector(text) for text in answers}

    def ready(self, graph: SoulGraph) -> bool:
        return True

    def nearest_ids(self, text: str, n: int, accept=None, exclude=frozenset()) -> list[str]:
        return self.answers[text]

    def question_vector(self, text: str):
        return self.questions[text]


def apart_and_together(graph: SoulGraph, store: VectorStore, questions: list[str]) -> dict[str, list[float]]:
    """A hybrid recall, its vectors' part alone and the rest alone (the vectors' answers given),
    timed in turn on each question so all three see the same machine. Together they cost more
    than the sum of the parts apart: each evicts the other's data from the caches."""
    keep = graph.index.membership()
    answered = _Answered(store, {q: store.nearest_ids(q, ranking.FUSION_DEPTH, keep) for q in questions})
    calls = {
        "the whole hybrid recall": lambda q: ranking.recall(graph, q, 10, vectors=store),
        "the vectors' part alone (question embedded, 200 nearest)": lambda q: store.nearest_ids(
            q, ranking.FUSION_DEPTH, keep),
        "the rest alone (the vectors' answer given)": lambda q: ranking.recall(graph, q, 10, vectors=answered),
    }
    return in_turn(calls, questions)


def the_floor(graph: SoulGraph, store: VectorStore, questions: list[str]) -> dict[str, list[float]]:
    """What a hybrid question costs before any ranking: the word search recall runs (15 deep)
    and the vectors' part (question embedded, 200 nearest), timed in turn on each question, and
    their sum per question. No fusion, neighbours, trust or variety: a recall that needs both
    searches cannot cost less than the sum."""
    keep = graph.index.membership()
    depth = ranking.pool(10)
    calls = {
        f"the word search alone ({depth} deep)": lambda q: graph.query(q, depth),
        "the vectors' part alone": lambda q: store.nearest_ids(q, ranking.FUSION_DEPTH, keep),
    }
    times = in_turn(calls, questions)
    times["the two searches, summed per question"] = [a + b for a, b in zip(*times.values())]
    return times


def what_the_shortlist_changes(graph: SoulGraph, store: VectorStore, questions: list[str]) -> str:
    """The shortlist's nearest against the exact ones on this index, and LoCoMo dev's recall with
    the shortlist and without it, each conversation asked in a crowd as large as this index
    (bench/crowd_locomo.py)."""
    import numpy as np

    import crowd_locomo  # beside this script
    from soulgraph.eval.scoring import summarize

    index = store.index
    used = len(index.id_of)
    found = {10: [], ranking.FUSION_DEPTH: []}
    rows = full_rows(graph, store).astype(np.float32)
    for q in questions:
        vector = store.question_vector(q)
        exact = rows @ vector
        picked = [index.row_of[i] for i, _ in index.nearest(vector, ranking.FUSION_DEPTH)]  # as recall asks
        for n in found:
            # A place won on a tie (copies of one text) counts as found when the tie is.
            bar = np.partition(exact, used - n)[used - n]
            found[n].append(float(np.mean(exact[picked[:n]] >= bar - 1e-6)))
    lines = [f"the shortlist at {used:,} memories ({index.shortlist.shape[1]} of {index.dimensions} "
             f"dimensions, {embeddings.SHORTLIST_FACTOR * ranking.FUSION_DEPTH} picks for the "
             f"{ranking.FUSION_DEPTH} nearest): "
             + ", ".join(f"{np.mean(v):.3f} of the exact first {n} found" for n, v in found.items())]
    # LoCoMo's conversations alone (400 to 700 memories) are too small for the shortlist to pick
    # anything out (3 x 200 picks): each is asked inside a crowd of the others, as large as this index.
    questions_asked, _ = crowd_locomo.crowd_replay(read_locomo(DATA), used)
    scores = summarize(questions_asked, crowd_locomo.METHODS, (1, 5, 10))["methods"]
    for method in crowd_locomo.METHODS[1:3]:
        row = scores[method]
        lines.append(f"LoCoMo dev in a crowd of {used:,} memories, {method}: R@1 {row['recall@1']:.3f}, "
                     f"R@5 {row['recall@5']:.3f}, R@10 {row['recall@10']:.3f}, MRR {row['mrr']:.3f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--base", help="a commit to compare the server's start-up with (a temporary worktree)")
    parser.add_argument("--recall-base", help="a commit since issue 15 to compare recall's speed with")
    parser.add_argument("--recall-only", action="store_true", help="print recall p50s as JSON (what --recall-base runs)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.recall_only:
        print(json.dumps(recall_p50s(sizes, args.questions)))
        return
    with worktree(args.base) as tree:
        print(f"start-up, import soulgraph.server.app (median of 5): {startup(args.base, tree)}")
    before = rss_mb()
    model = embeddings.default_model()
    for _ in range(10):
        model.embed("warming the tokenizer and the table's pages")
    print(f"the model, loaded (its table memory-mapped): {rss_mb() - before:.1f} MB resident")
    rows = []
    for size in sizes:
        graph, questions = conversation_graph(size)
        questions = questions[: args.questions]
        gc.collect()
        before = rss_mb()
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "soul.json.vectors"
            store = VectorStore(path, background=False)
            t0 = time.perf_counter()
            assert store.ready(graph)
            build = time.perf_counter() - t0
            store.save()
            per_node_kb = (rss_mb() - before) * 1000 / size
            t0 = time.perf_counter()
            again = VectorStore(path, background=False)
            assert again.ready(graph) and again.loaded_from == "file"
            load = time.perf_counter() - t0
            file_mb = path.stat().st_size / 1e6
        for q in questions[:50]:  # warm the tokenizer's word cache and the sibling order, as a server would be
            ranking.recall(graph, q, 10, vectors=store)
        base = timed(lambda q: ranking.recall(graph, q, 10, neighbours=False, time_aware=False), questions)
        lexical = timed(lambda q: ranking.recall(graph, q, 10), questions)
        hybrid = timed(lambda q: ranking.recall(graph, q, 10, vectors=store), questions)
        embed_q = timed(model.embed, questions)
        fresh = [f"{text} (new {n})" for n, text in enumerate(questions)]

        def add_one(text: str) -> None:
            graph.add(text)
            store.ready(graph)  # embeds the one new memory

        embed_add = timed(add_one, fresh[:300])
        rows.append((size, base, lexical, hybrid, embed_q, embed_add, build, load, file_mb, per_node_kb))
        parts = where_the_time_goes(graph, store, questions)
        split = apart_and_together(graph, store, questions)
        floor = the_floor(graph, store, questions)
        shortlist = what_the_shortlist_changes(graph, store, questions) if store.index.shortlist is not None else ""

    if shortlist:
        print()
        print(shortlist)
    print()
    print(f"where a hybrid question's time goes at {rows[-1][0]:,} memories (p50 of each step alone):")
    for name, values in parts.items():
        print(f"  {name:<58} {p(values, .5) * 1000:.2f} ms")
    print()
    print(f"the vectors and the rest of recall, apart and together, at {rows[-1][0]:,} memories (p50, in turn per question):")
    for name, values in split.items():
        print(f"  {name:<58} {p(values, .5) * 1000:.2f} ms")
    whole, *alone = (p(values, .5) for values in split.values())
    print(f"  {'together, beyond the two apart (caches shared)':<58} {(whole - sum(alone)) * 1000:.2f} ms")
    print()
    print(f"the floor: the two searches a hybrid question needs, nothing else, at {rows[-1][0]:,} memories "
          "(p50, in turn per question):")
    for name, values in floor.items():
        print(f"  {name:<58} {p(values, .5) * 1000:.2f} ms")
    print()
    print("| nodes | recall, baseline p50 / p99 | recall, lexical p50 / p99 | recall, hybrid p50 / p99 | hybrid / baseline (p50) "
          "| embed a question p50 | embed a new memory p50 | vectors: build / load | file | RSS per node |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size, base, lexical, hybrid, embed_q, embed_add, build, load, file_mb, per_node_kb in rows:
        ms = lambda values, q: f"{p(values, q) * 1000:.2f}"  # noqa: E731
        print(f"| {size:,} | {ms(base, .5)} / {ms(base, .99)} ms | {ms(lexical, .5)} / {ms(lexical, .99)} ms "
              f"| {ms(hybrid, .5)} / {ms(hybrid, .99)} ms | {p(hybrid, .5) / p(base, .5):.1f}x "
              f"| {ms(embed_q, .5)} ms | {ms(embed_add, .5)} ms | {build:.2f} s / {load * 1000:.0f} ms "
              f"| {file_mb:.1f} MB | {per_node_kb:.1f} kB |")

    with worktree(args.recall_base) as tree:
        if tree is not None:
            print()
            print(f"recall p50, this tree against {args.recall_base[:12]} (fresh processes, alternating, median of 2):")
            print(against_base(args.recall_base, tree, sizes, args.questions))


if __name__ == "__main__":
    main()
