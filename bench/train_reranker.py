"""Fit the reranking stage's networks (runtime/soulgraph/memory/rerank.py) and measure them on
LoCoMo dev with each conversation held out in turn:

    .venv/bin/python bench/train_reranker.py [--l2 0.001] [--epochs 15] [--members 5] [--hidden 16] [--write]

Each dev conversation is replayed into a graph as `python -m soulgraph.eval locomo` does
(soulgraph.eval.locomo: a session node, its turns under it), and each of its questions asked of
hybrid recall (memory/ranking.py with the static vectors) as the eval asks it. The stage's own
`rerank.features` are taken of the candidates recall hands the stage (its first `rerank.DEPTH`,
label: the candidate is evidence). Each conversation is also replayed through the memory
provider (soulgraph.eval.provider: its turns through `sync_turn`, a chain of turns under each
session node, with consolidation's facts), and the features taken of what its recall hands the
stage there. `--members` small networks (numpy, one hidden layer each, a listwise loss) are
fitted on both shapes of four conversations (`--fit-on eval`: the eval's graphs alone), and
recall is asked again with the stage using them on the fifth. The table gives R@1, R@5, R@10
and MRR of recall without the stage and with it, per held-out conversation, over all questions
and by category. Fitting is seeded: a run gives the same figures each time.

The same folds then go through the memory provider (soulgraph.eval.provider, as `python -m
soulgraph.eval provider` runs it): each held-out conversation's turns through `sync_turn`, its
questions through `recall`, the block prefetch injects (at most 8 memories in 1,500
characters) scored without the stage and with the fold's networks (`--no-provider` skips it).

`--write` then fits on all five conversations and writes rerank.MODEL_PATH: the networks'
weights, the features' means and spreads, and the held-out figures (numbers only: no text of
the data set is in the file). Recall uses the shipped stage while rerank.ENABLED (the tools'
answers; the provider's prefetch asks recall without it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "runtime"))

from soulgraph.engine import embeddings  # noqa: E402  (first: pins the BLAS threads)
from soulgraph.engine.graph import SoulGraph  # noqa: E402
from soulgraph.eval import provider  # noqa: E402
from soulgraph.eval.ledger import LedgerProblems  # noqa: E402
from soulgraph.hermes import memory_service  # noqa: E402
from soulgraph.eval.locomo import _sessions, read_locomo, scorable_questions, turn_text  # noqa: E402
from soulgraph.memory import ranking, rerank  # noqa: E402
from soulgraph.store.vectors import VectorStore  # noqa: E402

import numpy as np  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
L2 = 1e-3
EPOCHS = 15
MEMBERS = 10
HIDDEN = 16
BATCH = 32
RATE = 0.01


def conversation(sample: dict, number: int) -> tuple[SoulGraph, set[str], int, list]:
    """The graph of one conversation (as the eval builds it), its turns, its session count and
    its scorable questions."""
    now = 0.0
    graph = SoulGraph(clock=lambda: now)
    problems = LedgerProblems()
    where = str(sample.get("sample_id", number))
    turns: set[str] = set()
    sessions = _sessions(sample["conversation"], problems, where)
    for session, start, date_text, session_turns in sessions:
        session_id = f"session_{session}"
        graph.add(f"Session {session}, {date_text}" if date_text else f"Session {session}", ["session"],
                  node_id=session_id, created_at=start)
        for offset, turn in enumerate(session_turns, 1):
            dia_id = turn.get("dia_id") if isinstance(turn, dict) else None
            if not isinstance(dia_id, str) or not dia_id or dia_id in turns or dia_id in graph:
                continue
            now = start + offset
            graph.add(turn_text(turn), parents=[session_id], node_id=dia_id, created_at=now)
            turns.add(dia_id)
    return graph, turns, len(sessions), list(scorable_questions(sample, turns, problems, where))


def fit(questions: list[tuple[np.ndarray, np.ndarray]], l2: float = L2, epochs: int = EPOCHS,
        members: int = MEMBERS, hidden: int = HIDDEN) -> dict:
    """rerank.Model's data fitted to these questions ((features, labels) of each one's
    candidates): `members` networks of `hidden` rectified units, each from its own seeded start.
    The loss is listwise: a softmax over each question's candidates against its evidence
    (questions whose candidates hold none teach nothing and are left out); Adam, batches of
    32 questions, L2 on the weights."""
    x = np.concatenate([features for features, _ in questions])
    mean, spread = x.mean(axis=0), x.std(axis=0) + 1e-9
    taught = [((features - mean) / spread, labels / labels.sum()) for features, labels in questions if labels.sum()]
    return {"features": list(rerank.FEATURES), "mean": mean.tolist(), "spread": spread.tolist(),
            "members": [_network(taught, l2, epochs, hidden, seed) for seed in range(members)]}


def _network(taught: list[tuple[np.ndarray, np.ndarray]], l2: float, epochs: int, hidden: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    width = taught[0][0].shape[1]
    params = [rng.normal(0.0, width ** -0.5, (width, hidden)), np.zeros(hidden),
              rng.normal(0.0, hidden ** -0.5, hidden), np.zeros(1)]
    moments = [np.zeros_like(p) for p in params]
    squares = [np.zeros_like(p) for p in params]
    order, step = list(range(len(taught))), 0
    for _ in range(epochs):
        rng.shuffle(order)
        for start in range(0, len(order), BATCH):
            batch = [taught[i] for i in order[start:start + BATCH]]
            grads = [np.zeros_like(p) for p in params]
            w1, b1, w2, b2 = params
            for z, target in batch:
                h = np.maximum(z @ w1 + b1, 0.0)
                s = h @ w2 + b2[0]
                p = np.exp(s - s.max())
                g = p / p.sum() - target  # d(cross-entropy)/d(score)
                gh = np.outer(g, w2) * (h > 0)
                grads[0] += z.T @ gh
                grads[1] += gh.sum(axis=0)
                grads[2] += h.T @ g
                grads[3] += g.sum()  # about nil: a softmax ignores a shift, so out_bias stays near 0
            grads = [g / len(batch) for g in grads]
            grads[0] += l2 * w1
            grads[2] += l2 * w2
            step += 1
            for p, g, m, v in zip(params, grads, moments, squares):
                m *= 0.9
                m += 0.1 * g
                v *= 0.999
                v += 0.001 * g * g
                p -= RATE * (m / (1 - 0.9 ** step)) / (np.sqrt(v / (1 - 0.999 ** step)) + 1e-8)
    w1, b1, w2, b2 = params
    return {"hidden": w1.tolist(), "hidden_bias": b1.tolist(), "out": w2.tolist(), "out_bias": float(b2[0])}


def measure(orders: list[tuple[list[str], set[str]]]) -> dict[str, float]:
    out: dict[str, list[float]] = {"R@1": [], "R@5": [], "R@10": [], "MRR": []}
    for order, evidence in orders:
        first = next((i for i, node_id in enumerate(order) if node_id in evidence), None)
        for k in (1, 5, 10):
            out[f"R@{k}"].append(len(evidence & set(order[:k])) / len(evidence))
        out["MRR"].append(0.0 if first is None else 1.0 / (first + 1))
    return {name: statistics.mean(values) for name, values in out.items()}


def row(values: dict[str, float]) -> str:
    return " / ".join(f"{values[k]:.3f}" for k in values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--l2", type=float, default=L2)
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--members", type=int, default=MEMBERS, help="networks averaged")
    parser.add_argument("--hidden", type=int, default=HIDDEN, help="units in each network's hidden layer")
    parser.add_argument("--fit-on", choices=("both", "eval"), default="both",
                        help="the graphs fitted on: the eval's and the provider's (both), or the eval's alone")
    parser.add_argument("--no-provider", action="store_true", help="skip the held-out replay through the memory provider")
    parser.add_argument("--write", action="store_true", help=f"fit on every conversation and write {rerank.MODEL_PATH.name}")
    args = parser.parse_args()
    if not embeddings.available():
        raise SystemExit(f"train_reranker needs the vectors: {embeddings.unavailable_reason()}")
    started = time.perf_counter()
    conversations = []
    feature_times: list[float] = []
    samples = read_locomo(args.data)
    for number, sample in enumerate(samples):
        graph, turns, sessions, questions = conversation(sample, number)
        store = VectorStore(None, background=False)
        assert store.ready(graph), store.reason
        asked = []
        for _subject, category, text, evidence in questions:
            handed: list = []

            def capture(ranked, handed=handed):
                handed.append(ranked)
                return ranked

            depth = 20 + sessions  # as the eval asks: session nodes dropped, 20 turns left
            served = [h.node.id for h in ranking.recall(graph, text, depth, vectors=store, reorder=capture)]
            if not handed:  # not a question in words: recall does not fuse, the stage never runs
                continue
            head = handed[0][: rerank.DEPTH]
            began = time.perf_counter()
            x = rerank.features(graph, text, head, store)
            feature_times.append(time.perf_counter() - began)
            y = np.array([float(hit.node.id in evidence) for hit in head])
            asked.append({"x": x, "y": y, "text": text, "depth": depth, "evidence": set(evidence),
                          "category": category, "served": [i for i in served if i in turns]})
        conversations.append({"name": str(sample.get("sample_id", number)), "sample": sample,
                              "graph": graph, "store": store,
                              "through provider": provider_taught(sample) if args.fit_on == "both" else [],
                              "turns": turns, "asked": asked})
    print(f"LoCoMo dev: {len(conversations)} conversations, {sum(len(c['asked']) for c in conversations)} questions, "
          f"recall's first {rerank.DEPTH} reordered by the stage; each conversation held out in turn; "
          f"{time.perf_counter() - started:.0f} s to replay\n")
    print("| held out | questions | without the stage R@1 / R@5 / R@10 / MRR | with the stage R@1 / R@5 / R@10 / MRR |")
    print("|---|---:|---|---|")
    served_all, staged_all = [], []
    by_category: dict[str, tuple[list, list]] = {}
    stage_times: list[float] = []
    models = []
    for held in conversations:
        train = [(q["x"], q["y"]) for c in conversations if c is not held for q in c["asked"]]
        train += [pair for c in conversations if c is not held for pair in c["through provider"]]
        model = rerank.Model(fit(train, args.l2, args.epochs, args.members, args.hidden))
        models.append(model)
        graph, store, turns = held["graph"], held["store"], held["turns"]
        served, staged = [], []
        for q in held["asked"]:
            def stage(ranked, text=q["text"]):
                began = time.perf_counter()
                out = rerank.reorder(graph, text, ranked, store, model)
                stage_times.append(time.perf_counter() - began)
                return out

            order = [h.node.id for h in ranking.recall(graph, q["text"], q["depth"], vectors=store, reorder=stage)]
            served.append((q["served"], q["evidence"]))
            staged.append(([i for i in order if i in turns], q["evidence"]))
            pair = by_category.setdefault(q["category"], ([], []))
            pair[0].append(served[-1])
            pair[1].append(staged[-1])
        served_all += served
        staged_all += staged
        print(f"| {held['name']} | {len(served)} | {row(measure(served))} | {row(measure(staged))} |")
    totals = (measure(served_all), measure(staged_all))
    print(f"| **all** | {len(served_all)} | {row(totals[0])} | {row(totals[1])} |")
    print("\n| category | questions | without the stage R@1 / R@10 | with the stage R@1 / R@10 |\n|---|---:|---|---|")
    for category, (served, staged) in sorted(by_category.items()):
        a, b = measure(served), measure(staged)
        print(f"| {category} | {len(served)} | {a['R@1']:.3f} / {a['R@10']:.3f} | {b['R@1']:.3f} / {b['R@10']:.3f} |")
    print(f"\nthe stage for one question, p50: features {statistics.median(feature_times) * 1000:.2f} ms, "
          f"the whole reorder {statistics.median(stage_times) * 1000:.2f} ms ({rerank.DEPTH} candidates)")
    shares = None if args.no_provider else provider_shares(conversations, models)
    if args.write:
        everything = [(q["x"], q["y"]) for c in conversations for q in c["asked"]]
        provided = [pair for c in conversations for pair in c["through provider"]]
        record = {
            **fit(everything + provided, args.l2, args.epochs, args.members, args.hidden),
            "trained_by": "bench/train_reranker.py",
            "trained_on": f"LoCoMo dev ({len(conversations)} conversations, {len(everything)} questions asked of "
                          f"the eval's graphs, {len(provided)} through the memory provider): the candidates' "
                          "features and whether each is evidence; no text kept",
            "l2": args.l2, "epochs": args.epochs, "depth": rerank.DEPTH, "fit_on": args.fit_on,
            "held_out": {"served": totals[0], "with the stage": totals[1],
                         **({"provider injected": shares} if shares else {})},
        }
        rerank.MODEL_PATH.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"\nwrote {rerank.MODEL_PATH.relative_to(ROOT)}")
    return 0


def provider_taught(sample: dict) -> list[tuple[np.ndarray, np.ndarray]]:
    """One conversation through the memory provider, as `provider_shares` replays it: for each
    question its recall hands the stage, the features of those candidates and which of them hold
    evidence (a memory consolidation drew from a turn counts as the turn)."""
    caught = []
    real, kept = rerank.reorder, memory_service.PREFETCH_STAGE

    def capture(graph, text, ranked, vectors, model=None, exclude=frozenset()):
        head = ranked[: rerank.DEPTH]
        caught.append((text, [hit.node.id for hit in head], rerank.features(graph, text, head, vectors, exclude=exclude)))
        return ranked

    rerank.reorder, memory_service.PREFETCH_STAGE = capture, True
    try:
        run = provider.replay([sample], direct=False)
    finally:
        rerank.reorder, memory_service.PREFETCH_STAGE = real, kept
    turns = run["memory_turns"]
    evidence: dict[str, set[str]] = {}
    for _subject, _category, text, found in scorable_questions(sample, set(turns.values()), LedgerProblems(), "provider"):
        evidence.setdefault(text, set()).update(found)
    return [(x, np.array([float(turns.get(i) in evidence.get(text, ())) for i in ids])) for text, ids, x in caught]


def provider_shares(conversations: list[dict], models: list) -> dict[str, float]:
    """Each held-out conversation through the memory provider, its prefetch block scored without
    the stage and with that fold's networks; prints a table, returns the shares over all."""
    print("\nThrough the memory provider (each conversation held out in turn; the share of evidence in the block "
          f"prefetch injects, at most {memory_service.RECALL_LIMIT} memories in {memory_service.RECALL_BUDGET:,} characters):\n")
    print("| held out | questions | without the stage | with the stage | memories injected | answer words | recall p50 ms |\n"
          "|---|---:|---:|---:|---|---|---|")
    kept = memory_service.PREFETCH_STAGE, rerank.shipped
    totals: dict[str, list[float]] = {"without": [], "with": []}
    answered: dict[str, list[float]] = {"without": [], "with": []}
    try:
        for held, model in zip(conversations, models):
            rerank.shipped = lambda model=model: model
            got, items, p50, found = {}, {}, {}, {}
            for name, on in (("without", False), ("with", True)):
                memory_service.PREFETCH_STAGE = on
                run = provider.replay([held["sample"]], direct=False)
                got[name] = [provider.recall_at(q, provider.METHOD, run["limit"]) for q in run["questions"]]
                items[name] = statistics.mean(run["injected_items"])
                p50[name] = statistics.median(run["latencies"]) * 1000
                found[name] = statistics.mean(run["answer_words"])
                totals[name] += got[name]
                answered[name] += run["answer_words"]
            print(f"| {held['name']} | {len(got['with'])} | {statistics.mean(got['without']):.3f} | "
                  f"{statistics.mean(got['with']):.3f} | {items['without']:.1f} → {items['with']:.1f} | "
                  f"{found['without']:.3f} → {found['with']:.3f} | {p50['without']:.2f} → {p50['with']:.2f} |")
    finally:
        memory_service.PREFETCH_STAGE, rerank.shipped = kept
    shares = {name: statistics.mean(values) for name, values in totals.items()}
    words = {name: statistics.mean(values) for name, values in answered.items()}
    print(f"| **all** | {len(totals['with'])} | {shares['without']:.3f} | {shares['with']:.3f} | | "
          f"{words['without']:.3f} → {words['with']:.3f} | |")
    print("\nanswer words: the share of each written answer's words (LoCoMo's `answer`; the adversarial "
          "questions have none) that the block holds")
    return shares


if __name__ == "__main__":
    sys.exit(main())
