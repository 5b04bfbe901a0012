"""LoCoMo in a crowd: each dev conversation's questions asked of a store of 10,000 memories.

The harness's LoCoMo replay gives each conversation a graph of its own, 400 to 700 memories:
too few for the vectors' shortlist (engine/embeddings.py) to matter, and far fewer than the
10,000 memories the time budget is set at. Here each conversation is replayed inside a crowd: the
other four conversations' sessions, copied until the store holds `--size` memories, each session
at its own date, all written in date order. The questions are the conversation's own and only
its turns count as evidence; the crowd's copies of other people's chats are what a real agent's
store holds beside the answer.

It scores hybrid recall three ways on the same store, vectors and questions:
- exact: every row's full cosine (what the shortlist approximates);
- the shortlist, as shipped (its picks re-scored on their full rows);
- the shortlist's cosines alone, no second look (what that second look is worth);
and the lexical `recall` (no vectors) beside them. `--question-weights` weights the question's
words another way than recall does (store/vectors.py, `VectorStore.question_vector`).

    .venv/bin/python bench/crowd_locomo.py [--size 10000] [--question-weights both|store|model]

Scoring is the harness's own (soulgraph.eval.scoring); the turn texts, the session dates and the
evidence ids come from soulgraph.eval.locomo.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "runtime"))

import numpy as np  # noqa: E402

from soulgraph.engine import embeddings  # noqa: E402
from soulgraph.engine.graph import SoulGraph  # noqa: E402
from soulgraph.eval.ledger import LedgerProblems  # noqa: E402
from soulgraph.eval.locomo import _sessions, read_locomo, scorable_questions, turn_text  # noqa: E402
from soulgraph.eval.scoring import Question, summarize  # noqa: E402
from soulgraph.memory import ranking  # noqa: E402
from soulgraph.store.vectors import STORE_WEIGHT_A, VectorStore  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
KS = (1, 5, 10, 20)


def crowd_graph(data: list[dict], asked: int, size: int) -> tuple[SoulGraph, set[str]]:
    """The asked conversation's sessions and, around them, the others' (copied to `size` memories),
    all in date order. Returns the graph and the asked conversation's turn ids."""
    problems = LedgerProblems()
    own, crowd = [], []
    for number, sample in enumerate(data):
        for session, start, date_text, turns in _sessions(sample["conversation"], problems, str(number)):
            texts = [(t.get("dia_id"), turn_text(t)) for t in turns if isinstance(t, dict)]
            (own if number == asked else crowd).append((start, f"{number}-{session}", date_text, texts))
    sessions = [(start, name, date_text, texts, "") for start, name, date_text, texts in own]
    total = sum(len(texts) + 1 for *_, texts in own)
    copy = 0
    while total < size and crowd:
        for start, name, date_text, texts in crowd:
            if total >= size:
                break
            texts = texts[: max(0, size - total - 1)]
            sessions.append((start, name, date_text, texts, f"c{copy}:"))
            total += len(texts) + 1
        copy += 1
    sessions.sort(key=lambda s: (s[0], s[4], s[1]))
    clock = [0.0]
    graph = SoulGraph(clock=lambda: clock[0])
    turns: set[str] = set()
    for start, name, date_text, texts, prefix in sessions:
        session = graph.add(f"Session {name.split('-')[1]}, {date_text}", ["session"],
                            node_id=f"{prefix}session {name}", created_at=start)
        for offset, (dia_id, text) in enumerate(texts, 1):
            node_id = f"{prefix}{name.split('-')[0]}:{dia_id}"
            if node_id in graph:
                continue
            graph.add(text, parents=[session.id], node_id=node_id, created_at=start + offset)
            if not prefix:
                turns.add(node_id)
            clock[0] = max(clock[0], start + offset)
    return graph, turns


def _store_weights_only(store: VectorStore, text: str):
    ids = store.model.token_ids(text)
    return store.model.embed_ids(ids, store.index.store_weights(ids, STORE_WEIGHT_A))


QUESTION_WEIGHTS = {"both": VectorStore.question_vector, "store": _store_weights_only,
                    "model": lambda store, text: store.model.embed(text)}
QUESTION_WEIGHTS_SAID = {"both": "half by this store's word frequencies, half by the model's (as shipped)",
                         "store": "by this store's word frequencies alone",
                         "model": "by the model's word frequencies alone (general English)"}


def _rough_only(self, query, n, skip=None):
    """VectorIndex._nearest_rows with the shortlist's cosines as the ranking (no full rows read);
    `skip`: rows never returned, as there."""
    used = len(self.id_of)
    if n <= 0 or not self.row_of or not query.any():
        return np.zeros(0, np.intp), np.zeros(0, np.float32)
    rough = self.rough_scores(np.arange(used), query @ self.basis)  # every direction, every row
    if skip is not None:
        skip = skip[:used] if len(skip) >= used else np.pad(skip, (0, used - len(skip)))
        rough[skip] = -np.inf
    n = min(n, used)
    top = np.sort(np.argpartition(rough, used - n)[used - n:])
    top = top[np.argsort(-rough[top], kind="stable")]
    return top, rough[top]


METHODS = ["recall (lexical)", "hybrid, exact", "hybrid, shortlist (shipped)", "hybrid, shortlist's cosines alone"]


def crowd_replay(data: list[dict], size: int) -> tuple[list[Question], list[float]]:
    """Every dev question asked of its conversation in a crowd of `size` memories, by each of
    METHODS; and for each question, the share of the exact 200 nearest the shortlist holds."""
    questions: list[Question] = []
    fidelity: list[float] = []
    problems = LedgerProblems()
    shipped_rows = embeddings.VectorIndex._nearest_rows
    for asked, sample in enumerate(data):
        graph, turns = crowd_graph(data, asked, size)
        store = VectorStore(None, background=False)
        assert store.ready(graph) and store.index.shortlist is not None, "the crowd is too small for the shortlist"
        exact_store = store if store.index.matrix is not None else _with_full_rows(graph)
        shortlist = exact_store.index.shortlist
        prefix = f"{asked}:"
        plain = {turn[len(prefix):] for turn in turns}
        for subject, category, text, evidence in scorable_questions(sample, plain, problems, str(asked)):
            question = Question(category, subject, 0.0, {prefix + e: 0.0 for e in evidence})
            for method in METHODS:
                vectors = exact_store if method == "hybrid, exact" else store
                exact_store.index.shortlist = None if method == "hybrid, exact" else shortlist
                embeddings.VectorIndex._nearest_rows = _rough_only if "alone" in method else shipped_rows
                try:
                    # Deep enough that the session nodes (structure, skipped) leave 20 memories.
                    hits = ranking.recall(graph, text, max(KS) + 40, vectors=None if "lexical" in method else vectors)
                finally:
                    exact_store.index.shortlist = shortlist
                    embeddings.VectorIndex._nearest_rows = shipped_rows
                # Every memory counts, the crowd's included: only the session nodes are skipped.
                question.record(method, [h.node.id for h in hits if "session" not in h.node.tags][: max(KS)])
            questions.append(question)
            if ranking.hybrid.is_question(text):
                exact = {i for i, _ in _exact_nearest(exact_store, text)}
                fidelity.append(len(exact & set(store.nearest_ids(text, ranking.FUSION_DEPTH))) / len(exact))
    return questions, fidelity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--question-weights", choices=sorted(QUESTION_WEIGHTS), default="both",
                        help="how the question's words are weighted: both ways, half each (as shipped), by their "
                             "frequency in this store alone, or as the model weighs a memory's (general English)")
    args = parser.parse_args()
    data = read_locomo(args.data)
    if args.question_weights != "both":
        VectorStore.question_vector = QUESTION_WEIGHTS[args.question_weights]
    started = time.perf_counter()
    questions, fidelity = crowd_replay(data, args.size)
    print(f"LoCoMo dev in a crowd of {args.size:,} memories: {len(data)} conversations, {len(questions)} questions, "
          f"the question's words weighted {QUESTION_WEIGHTS_SAID[args.question_weights]}; "
          f"{time.perf_counter() - started:.0f} s\n")
    scores = summarize(questions, METHODS, KS)["methods"]
    print("| method | R@1 | R@5 | R@10 | R@20 | MRR |")
    print("|---|---:|---:|---:|---:|---:|")
    for method in METHODS:
        row = scores[method]
        print(f"| {method} | " + " | ".join(f"{row[f'recall@{k}']:.3f}" for k in KS) + f" | {row['mrr']:.3f} |")
    print(f"\nthe shortlist's {ranking.FUSION_DEPTH} nearest hold {np.mean(fidelity):.3f} of the exact "
          f"{ranking.FUSION_DEPTH} (mean over {len(fidelity)} questions)")
    print("\nR@10 by category:\n")
    print("| category | questions | " + " | ".join(METHODS) + " |")
    print("|---|---:|" + "---:|" * len(METHODS))
    for category in sorted({q.kind for q in questions}):
        asked = [q for q in questions if q.kind == category]
        row = summarize(asked, METHODS, (10,))["methods"]
        print(f"| {category} | {len(asked)} | " + " | ".join(f"{row[m]['recall@10']:.3f}" for m in METHODS) + " |")


def _with_full_rows(graph) -> VectorStore:
    """The crowd's vectors again, their full rows kept (a crowd past embeddings.TAIL_FROM keeps
    its rows' coordinates instead): what the exact method and the reference read."""
    kept, embeddings.TAIL_FROM = embeddings.TAIL_FROM, None
    try:
        store = VectorStore(None, background=False)
        assert store.ready(graph)
        return store
    finally:
        embeddings.TAIL_FROM = kept


def _exact_nearest(store: VectorStore, text: str) -> list[tuple[str, float]]:
    index = store.index
    shortlist, index.shortlist = index.shortlist, None
    try:
        return store.nearest(text, ranking.FUSION_DEPTH)
    finally:
        index.shortlist = shortlist


if __name__ == "__main__":
    main()
