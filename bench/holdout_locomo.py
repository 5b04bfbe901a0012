"""Do hybrid recall's tuned weights carry over to conversations they were not tuned on?

Issue 15's weights (fusion depth, the vectors' RRF weight, the time boost, the neighbour shares)
were chosen on LoCoMo's five dev conversations; recall is also measured on conversations we never
see. This script estimates that held-out figure the usual way, leaving one conversation out: for
each dev conversation, the setting of a grid that scores best on the other four is chosen and
scored on the one left out. Beside it, the shipped setting on each conversation, and the best
setting for each conversation (a ceiling nobody could pick in advance).

    .venv/bin/python bench/holdout_locomo.py [--quick]

Everything goes through the harness's own replay (soulgraph.eval.locomo.replay_locomo) and
scoring; each setting is a retriever registered at run time that sets the module constants, asks
`ranking.recall` with the vectors (without the reranking stage), and puts them back. One VectorStore per conversation is shared
by all the settings (the weights act at question time only). Nothing in the runtime is edited.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
import weakref
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "runtime"))

from soulgraph.engine import hybrid  # noqa: E402
from soulgraph.engine.graph import SoulGraph  # noqa: E402
from soulgraph.eval import retrievers  # noqa: E402
from soulgraph.eval.locomo import read_locomo, replay_locomo  # noqa: E402
from soulgraph.eval.scoring import recall_at  # noqa: E402
from soulgraph.memory import ranking  # noqa: E402
from soulgraph.store.vectors import VectorStore  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
K = 10

# The knobs, each with the values docs/eval.md says were tried; the shipped value first.
SHIPPED = {"depth": ranking.FUSION_DEPTH, "weight": hybrid.VECTOR_WEIGHT, "boost": hybrid.TIME_BOOST,
           "shares": (hybrid.NEXT_SHARE, hybrid.PREVIOUS_SHARE)}
GRID = {
    "depth": [200, 100, 300],
    "weight": [0.5, 0.25, 1.0],
    "boost": [2.0, 1.5, 3.0],
    "shares": [(0.5, 0.25), (0.25, 0.125), (0.5, 0.5)],
}
QUICK_GRID = {"depth": [200, 100], "weight": [0.5, 1.0], "boost": [2.0, 3.0], "shares": [(0.5, 0.25)]}

_STORES: "weakref.WeakKeyDictionary[SoulGraph, VectorStore]" = weakref.WeakKeyDictionary()


def _store(graph: SoulGraph) -> VectorStore:
    """One store per conversation's graph, shared by every setting's retriever."""
    store = _STORES.get(graph)
    if store is None:
        store = _STORES[graph] = VectorStore(None, background=False)
    return store


def _name(setting: dict) -> str:
    next_share, previous_share = setting["shares"]
    return (f"d{setting['depth']}_w{setting['weight']:g}_b{setting['boost']:g}"
            f"_n{next_share:g}p{previous_share:g}")


def _retriever(setting: dict) -> type:
    values = {(ranking, "FUSION_DEPTH"): setting["depth"], (hybrid, "VECTOR_WEIGHT"): setting["weight"],
              (hybrid, "TIME_BOOST"): setting["boost"], (hybrid, "NEXT_SHARE"): setting["shares"][0],
              (hybrid, "PREVIOUS_SHARE"): setting["shares"][1]}

    class Setting(retrievers._GraphRetriever):
        name = _name(setting)

        def ask(self, text: str, k: int) -> list[str]:
            saved = {key: getattr(*key) for key in values}
            for (module, attribute), value in values.items():
                setattr(module, attribute, value)
            try:
                # The fusion's weights alone: the reranking stage after it is measured by
                # bench/train_reranker.py, fitted on these same conversations.
                return [hit.node.id for hit in ranking.recall(self.graph, text, k, vectors=_store(self.graph),
                                                              stage=False)]
            finally:
                for (module, attribute), value in saved.items():
                    setattr(module, attribute, value)

    return Setting


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--quick", action="store_true", help="a 2x2x2x1 grid (for a smoke run)")
    args = parser.parse_args()
    grid = QUICK_GRID if args.quick else GRID
    settings = [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
    shipped = _name(SHIPPED)
    assert shipped in {_name(s) for s in settings}, "the grid must hold the shipped setting"
    for setting in settings:
        retrievers.METHODS[_name(setting)] = _retriever(setting)
    names = [_name(s) for s in settings]

    data = read_locomo(args.data)
    started = time.perf_counter()
    result = replay_locomo(data, ["bm25", "recall"] + names)
    seconds = time.perf_counter() - started

    # Per conversation: the questions' R@K under each method, summed (means are taken per question).
    by_conversation: dict[str, list] = defaultdict(list)
    for question in result.questions:
        by_conversation[question.subject.split(" q")[0]].append(question)
    conversations = sorted(by_conversation)
    total = {c: {m: sum(recall_at(q, m, K) for q in by_conversation[c]) for m in ["bm25", "recall"] + names}
             for c in conversations}
    count = {c: len(by_conversation[c]) for c in conversations}

    def r(methods_of: dict[str, str], among: list[str]) -> float:
        """Question-weighted R@K over `among`, each conversation scored by its own method."""
        return sum(total[c][methods_of[c]] for c in among) / sum(count[c] for c in among)

    print(f"LoCoMo dev: {len(conversations)} conversations, {len(result.questions)} questions, "
          f"{len(settings)} settings of hybrid recall; {seconds:.0f} s\n")
    print(f"R@{K} per conversation (the shipped setting is {shipped}):\n")
    print("| conversation | questions | bm25 | recall (lexical) | hybrid, shipped | best setting here | its R@10 |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for c in conversations:
        best = max(names, key=lambda m: (total[c][m], m == shipped))
        print(f"| {c} | {count[c]} | {total[c]['bm25'] / count[c]:.3f} | {total[c]['recall'] / count[c]:.3f} "
              f"| {total[c][shipped] / count[c]:.3f} | {best} | {total[c][best] / count[c]:.3f} |")

    print(f"\nLeave one conversation out: the setting best on the other {len(conversations) - 1}, "
          f"scored on the one left out (ties to the shipped setting):\n")
    print(f"| left out | chosen on the others | R@{K} left out | shipped, left out |")
    print("|---|---|---:|---:|")
    chosen = {}
    for c in conversations:
        others = [o for o in conversations if o != c]
        chosen[c] = max(names, key=lambda m: (r(dict.fromkeys(others, m), others), m == shipped))
        print(f"| {c} | {chosen[c]} | {total[c][chosen[c]] / count[c]:.3f} | {total[c][shipped] / count[c]:.3f} |")
    every = conversations
    oracle = {c: max(names, key=lambda m: total[c][m]) for c in conversations}
    print(f"\nR@{K} over all {len(result.questions)} questions:")
    print(f"  bm25                                         {r(dict.fromkeys(every, 'bm25'), every):.3f}")
    print(f"  recall, lexical                              {r(dict.fromkeys(every, 'recall'), every):.3f}")
    print(f"  hybrid, shipped setting                      {r(dict.fromkeys(every, shipped), every):.3f}")
    print(f"  hybrid, chosen leaving each conversation out {r(chosen, every):.3f}  (the held-out estimate)")
    print(f"  hybrid, best setting for each conversation   {r(oracle, every):.3f}  (a ceiling, not a method)")
    for depth in grid["depth"]:
        at_depth = [_name(s) for s in settings if s["depth"] == depth]
        fixed = {c: max(at_depth, key=lambda m: (r(dict.fromkeys([o for o in every if o != c], m),
                                                   [o for o in every if o != c]), m == shipped)) for c in every}
        print(f"  hybrid, fusion depth {depth}, the rest chosen leaving each out {r(fixed, every):.3f}  "
              f"({', '.join(sorted(set(fixed.values())))})")
    spread = sorted(r(dict.fromkeys(every, m), every) for m in names)
    print(f"  hybrid, the grid's settings on all           {spread[0]:.3f} to {spread[-1]:.3f}")

    def line(name: str) -> str:
        return (f"| {name} | {r(dict.fromkeys(every, name), every):.3f} | "
                + " | ".join(f"{total[c][name] / count[c]:.3f}" for c in conversations) + " |")

    header = (f"| setting | R@{K}, all | " + " | ".join(conversations) + " |\n|---|---:|"
              + "---:|" * len(conversations))
    print(f"\nEach knob alone, the others shipped (R@{K}):\n")
    print(header)
    print(line(shipped))
    for knob, values in grid.items():
        for value in values:
            name = _name({**SHIPPED, knob: value})
            if name in names and name != shipped:
                print(line(name))
    print(f"\nThe grid's five best settings on all questions (R@{K}):\n")
    print(header)
    for name in sorted(names, key=lambda m: -r(dict.fromkeys(every, m), every))[:5]:
        print(line(name))


if __name__ == "__main__":
    main()
