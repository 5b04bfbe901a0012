"""A trial for issue 32: rerank hybrid recall's first 30 by a linear model over cheap features,
measured on LoCoMo dev with each conversation held out in turn.

    .venv/bin/python bench/rerank_trial.py [--depth 30] [--l2 1.0]

Each dev conversation is replayed into a graph as `python -m soulgraph.eval locomo` does
(soulgraph.eval.locomo: a session node, its turns under it), and each of its questions asked of
hybrid recall (memory/ranking.py with the static vectors), `--depth` deep. Every candidate gets
the features below; a logistic regression (numpy, L2) is fitted on the other conversations'
candidates (label: the candidate is evidence) and reorders this conversation's; turns beyond the
depth keep their places. The table gives R@1, R@5, R@10 and MRR of the served order and of the
reordered one, per held-out conversation and over all questions.

Features (q: the question, c: the candidate, p / n: the turns just before and after c in its
session): c's place in the served order (1 / (1 + place)) and its score over the first's; the
cosines of q with c, p and n (the store's vectors); the share of q's idf that c, p and n hold
(the word index's words); whether c's speaker is named in q; whether c lies in the time q names
(engine/when.py); c's length in words (log). No LLM, nothing downloaded: what recall already has.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "runtime"))

from soulgraph.engine import embeddings, when  # noqa: E402  (first: pins the BLAS threads)
from soulgraph.engine.graph import SoulGraph  # noqa: E402
from soulgraph.engine.index import words  # noqa: E402
from soulgraph.eval.ledger import LedgerProblems  # noqa: E402
from soulgraph.eval.locomo import _sessions, read_locomo, scorable_questions, turn_text  # noqa: E402
from soulgraph.memory import ranking  # noqa: E402
from soulgraph.store.vectors import VectorStore  # noqa: E402

import numpy as np  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
FEATURES = ["place", "score share", "cos c", "cos before", "cos after", "idf c", "idf before", "idf after",
            "speaker named", "in the time named", "log words", "asks a question", "cos place", "idf place"]


def conversation(sample: dict, number: int) -> tuple[SoulGraph, dict[str, tuple[str | None, str | None]], set[str], list]:
    """The graph of one conversation (as the eval builds it), each turn's neighbours in its
    session, its turns, and its scorable questions."""
    now = 0.0
    graph = SoulGraph(clock=lambda: now)
    problems = LedgerProblems()
    where = str(sample.get("sample_id", number))
    turns: set[str] = set()
    around: dict[str, tuple[str | None, str | None]] = {}
    for session, start, date_text, session_turns in _sessions(sample["conversation"], problems, where):
        session_id = f"session_{session}"
        graph.add(f"Session {session}, {date_text}" if date_text else f"Session {session}", ["session"],
                  node_id=session_id, created_at=start)
        order = []
        for offset, turn in enumerate(session_turns, 1):
            dia_id = turn.get("dia_id") if isinstance(turn, dict) else None
            if not isinstance(dia_id, str) or not dia_id or dia_id in turns or dia_id in graph:
                continue
            now = start + offset
            graph.add(turn_text(turn), parents=[session_id], node_id=dia_id, created_at=now)
            turns.add(dia_id)
            order.append(dia_id)
        for at, dia_id in enumerate(order):
            around[dia_id] = (order[at - 1] if at else None, order[at + 1] if at + 1 < len(order) else None)
    questions = list(scorable_questions(sample, turns, problems, where))
    return graph, around, turns, questions


def features(graph: SoulGraph, store: VectorStore, around: dict, text: str, ranked: list) -> np.ndarray:
    index = store.index
    question = store.question_vector(text)
    asked = words(text)
    weights = {w: graph.index.idf(w) for w in asked}
    total = sum(weights.values()) or 1.0
    span = when.window(text, graph.clock())
    names = {w.lower() for w in text.replace("'s", " ").split()}

    def cosine(node_id: str | None) -> float:
        if node_id is None or node_id not in index:
            return 0.0
        return float(index.scores(np.array([index.row_of[node_id]]), question)[0])

    def idf_share(node_id: str | None) -> float:
        if node_id is None:
            return 0.0
        held = words(graph.nodes[node_id].content)
        return sum(weight for w, weight in weights.items() if w in held) / total

    top = ranked[0].score or 1.0
    rows = []
    for place, hit in enumerate(ranked):
        node = hit.node
        before, after = around.get(node.id, (None, None))
        speaker = node.content.split(":", 1)[0].strip().lower() if ":" in node.content[:40] else ""
        rows.append([1.0 / (1 + place), hit.score / top, cosine(node.id), cosine(before), cosine(after),
                     idf_share(node.id), idf_share(before), idf_share(after),
                     float(bool(speaker) and speaker in names),
                     float(span is not None and span[0] <= node.created_at < span[1] + 7 * 86400.0),
                     math.log1p(len(node.content.split())), float(node.content.rstrip().endswith("?"))])
    out = np.array(rows, np.float64)
    # Each candidate's place among the candidates by its cosine alone, and by its words alone.
    for column in (2, 5):
        places = np.empty(len(out))
        places[np.argsort(-out[:, column], kind="stable")] = np.arange(len(out))
        out = np.column_stack([out, 1.0 / (1.0 + places)])
    return out


def fit(x: np.ndarray, y: np.ndarray, l2: float, steps: int = 400) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    mean, std = x.mean(axis=0), x.std(axis=0) + 1e-9
    z = (x - mean) / std
    w = np.zeros(z.shape[1])
    b = 0.0
    rate = 0.5
    positive = max(1.0, (len(y) - y.sum()) / max(y.sum(), 1.0))  # balance the few evidence rows
    sample_weight = np.where(y > 0, positive, 1.0)
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(z @ w + b)))
        g = (p - y) * sample_weight
        w -= rate * (z.T @ g / len(y) + l2 * w / len(y))
        b -= rate * g.mean()
    return w, mean, std


def fit_listwise(questions: list, l2: float, steps: int = 300) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A softmax over each question's candidates, fitted to put its evidence first (the
    cross-entropy against the evidence, shared equally): what R@1 and MRR reward."""
    x = np.concatenate([q[0] for q in questions])
    mean, std = x.mean(axis=0), x.std(axis=0) + 1e-9
    zs = [((q[0] - mean) / std, q[1] / q[1].sum()) for q in questions if q[1].sum() > 0]
    w = np.zeros(x.shape[1])
    rate = 0.5
    for _ in range(steps):
        grad = l2 * w
        for z, target in zs:
            s = z @ w
            p = np.exp(s - s.max())
            p /= p.sum()
            grad += z.T @ (p - target)
        w -= rate * grad / len(zs)
    return w, mean, std


def measure(orders: list[tuple[list[str], set[str]]]) -> dict[str, float]:
    out = {"R@1": [], "R@5": [], "R@10": [], "MRR": []}
    for order, evidence in orders:
        first = next((i for i, node_id in enumerate(order) if node_id in evidence), None)
        for k in (1, 5, 10):
            out[f"R@{k}"].append(len(evidence & set(order[:k])) / len(evidence))
        out["MRR"].append(0.0 if first is None else 1.0 / (first + 1))
    return {name: statistics.mean(values) for name, values in out.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--depth", type=int, default=30, help="candidates reordered per question (default 30)")
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument("--loss", choices=("listwise", "pointwise"), default="pointwise",
                        help="a softmax over each question's candidates, or a logistic regression per candidate")
    args = parser.parse_args()
    if not embeddings.available():
        raise SystemExit(f"rerank_trial needs the vectors: {embeddings.unavailable_reason()}")
    started = time.perf_counter()
    feature_times: list[float] = []
    per: list[dict] = []  # per conversation: its questions' (features, labels, served order, evidence)
    for number, sample in enumerate(read_locomo(args.data)):
        graph, around, turns, questions = conversation(sample, number)
        store = VectorStore(None, background=False)
        assert store.ready(graph), store.reason
        asked = []
        for _subject, category, text, evidence in questions:
            ranked = [hit for hit in ranking.recall(graph, text, args.depth + 20, vectors=store) if hit.node.id in turns]
            order = [hit.node.id for hit in ranked]
            head = ranked[: args.depth]
            if not head:
                continue
            began = time.perf_counter()
            x = features(graph, store, around, text, head)
            feature_times.append(time.perf_counter() - began)
            y = np.array([float(hit.node.id in evidence) for hit in head])
            asked.append((x, y, order, set(evidence), category))
        per.append({"name": str(sample.get("sample_id", number)), "asked": asked})
    print(f"LoCoMo dev: {len(per)} conversations, {sum(len(c['asked']) for c in per)} questions, "
          f"hybrid recall's first {args.depth} reordered ({args.loss}); each conversation held out in turn; "
          f"{time.perf_counter() - started:.0f} s to replay\n")
    print("| held out | questions | served R@1 / R@5 / R@10 / MRR | reordered R@1 / R@5 / R@10 / MRR |")
    print("|---|---:|---|---|")
    served_all, reordered_all, weights = [], [], []
    by_category: dict[str, tuple[list, list]] = {}
    for held in per:
        train = [q for c in per if c is not held for q in c["asked"]]
        if args.loss == "listwise":
            w, mean, std = fit_listwise(train, args.l2)
        else:
            w, mean, std = fit(np.concatenate([q[0] for q in train]), np.concatenate([q[1] for q in train]), args.l2)
        weights.append(w)
        served, reordered = [], []
        for x_q, _y, order, evidence, category in held["asked"]:
            score = ((x_q - mean) / std) @ w
            head = order[: len(x_q)]
            new = [head[i] for i in np.argsort(-score, kind="stable")] + order[len(x_q):]
            served.append((order, evidence))
            reordered.append((new, evidence))
            by_category.setdefault(category, ([], []))
            by_category[category][0].append((order, evidence))
            by_category[category][1].append((new, evidence))
        a, b = measure(served), measure(reordered)
        served_all += served
        reordered_all += reordered
        print(f"| {held['name']} | {len(served)} | " + " / ".join(f"{a[k]:.3f}" for k in a) + " | "
              + " / ".join(f"{b[k]:.3f}" for k in b) + " |")
    a, b = measure(served_all), measure(reordered_all)
    print(f"| **all** | {len(served_all)} | " + " / ".join(f"{a[k]:.3f}" for k in a) + " | "
          + " / ".join(f"{b[k]:.3f}" for k in b) + " |")
    print("\n| category | questions | served R@1 / R@10 | reordered R@1 / R@10 |\n|---|---:|---|---|")
    for category, (served, reordered) in sorted(by_category.items()):
        a, b = measure(served), measure(reordered)
        print(f"| {category} | {len(served)} | {a['R@1']:.3f} / {a['R@10']:.3f} | {b['R@1']:.3f} / {b['R@10']:.3f} |")
    print(f"\nthe features of one question's {args.depth} candidates, as this script computes them: "
          f"p50 {statistics.median(feature_times) * 1000:.2f} ms (scoring them is one product)")
    mean_w = np.mean(weights, axis=0)
    print("\nweights (standardised features, mean over the folds): "
          + ", ".join(f"{name} {value:+.2f}" for name, value in zip(FEATURES, mean_w)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
