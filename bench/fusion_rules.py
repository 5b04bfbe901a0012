"""Fusion rules fixed in advance, registered into soulgraph.eval.retrievers.METHODS at run time,
then scored by the harness's own CLI (soulgraph.eval.__main__.main). The repo is not edited.

Run (same argv as `python -m soulgraph.eval ...`; in the venv of bench/distill_static.py, after it):
  OMP_NUM_THREADS=1 nice -n 19 /tmp/embed/bin/python bench/fusion_rules.py \
    locomo ../shared/data/locomo/locomo-dev.json --methods related,static,rrf_rel_s05,gate_bm_med_s1
  ... bench/fusion_rules.py ledger ../shared/data/ledgers/eips_ledger.json --methods ...

Component rankings (full, every node, session nodes included exactly as the built-ins return them;
the harness's LoCoMo replay drops session nodes itself):
  static  : ledger_static.Static (cosine, distill/variants/mean_384_wfsif.npy; ties newest first)
  bm25    : harness BM25 scores of every matching node, top_k ties (newest first)
  related : graph.related(text, 200)  (the harness's `related` retriever, asked with k = 200)
Rules (RRF k = 60; a node missing from a ranking gets nothing from it; ties -> better rank in the
first ranking, then better static rank):
  rrf_rel_sW  : 1/(60+rank_related) + W/(60+rank_static), W in {0.25, 0.5, 1}
  rrf_bm_s05  : 1/(60+rank_bm25)    + 0.5/(60+rank_static)
  related200  : graph.related(text, 200)[:k] (reference: the related ranking the fusions use)
  gate_rel_s1 : related's ranking as is, unless the question shares fewer than 2 words
                (engine words(): lower-cased, stopwords dropped, plurals folded) with related's
                top hit's text; then rrf_rel_s1. (Empty related ranking -> gate open.)
  gate_bm_med_s1 : related's ranking as is, unless BM25's top score for the question is below the
                median of BM25 top scores of the questions this retriever instance was asked before
                (one instance per LoCoMo conversation / per ledger; first question: closed); then rrf_rel_s1.
"""
from __future__ import annotations

import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "runtime"))
sys.path.insert(0, HERE)

_argv = sys.argv[1:]
sys.argv = [sys.argv[0]]  # ledger_static reads sys.argv at import
import ledger_static as LS  # noqa: E402  (registers `static`, `static_rrf`; main block not run)
from soulgraph.eval import retrievers as R  # noqa: E402
from soulgraph.eval.__main__ import main  # noqa: E402
from soulgraph.engine.index import words  # noqa: E402

RRF_K = 60
RELATED_K = 200


def rrf(first: list[str], second: list[str], w: float) -> list[str]:
    fused: dict[str, float] = {}
    for i, d in enumerate(first, 1):
        fused[d] = fused.get(d, 0.0) + 1.0 / (RRF_K + i)
    for i, d in enumerate(second, 1):
        fused[d] = fused.get(d, 0.0) + w / (RRF_K + i)
    r1 = {d: i for i, d in enumerate(first)}
    r2 = {d: i for i, d in enumerate(second)}
    return sorted(fused, key=lambda d: (-fused[d], r1.get(d, 10**9), r2.get(d, 10**9)))


class _Fused(R.Retriever):
    def __init__(self, graph) -> None:
        self.graph = graph
        self.static = LS.Static()
        self.bm25 = R.BM25()
        self.text: dict[str, str] = {}

    def observe_add(self, node_id: str, text: str, at: float) -> None:
        self.static.observe_add(node_id, text, at)
        self.bm25.observe_add(node_id, text, at)
        self.text[node_id] = text

    def related_ranking(self, text: str) -> list[str]:
        return [h.node.id for h in self.graph.related(text, RELATED_K)]

    def bm25_ranking(self, text: str) -> list[str]:
        scores = self.bm25.index.scores(text)
        return R.top_k(scores, len(scores), self.bm25.seq)


def make_rel(w: float, name: str):
    class RelStatic(_Fused):
        def ask(self, text: str, k: int) -> list[str]:
            return rrf(self.related_ranking(text), self.static.ranking(text), w)[:k] if k > 0 else []
    RelStatic.name = name
    return RelStatic


class BmStatic(_Fused):
    name = "rrf_bm_s05"

    def ask(self, text: str, k: int) -> list[str]:
        return rrf(self.bm25_ranking(text), self.static.ranking(text), 0.5)[:k] if k > 0 else []


class Gate(_Fused):
    name = "gate_rel_s1"
    opened = 0
    asked = 0

    def ask(self, text: str, k: int) -> list[str]:
        if k <= 0:
            return []
        rel = self.related_ranking(text)
        Gate.asked += 1
        if rel and len(words(text) & words(self.text.get(rel[0], ""))) >= 2:
            return rel[:k]
        Gate.opened += 1
        return rrf(rel, self.static.ranking(text), 1.0)[:k]


for _w, _n in ((0.25, "rrf_rel_s025"), (0.5, "rrf_rel_s05"), (1.0, "rrf_rel_s1")):
    R.METHODS[_n] = make_rel(_w, _n)
R.METHODS["rrf_bm_s05"] = BmStatic
R.METHODS["gate_rel_s1"] = Gate


class GateMedian(_Fused):
    """related as is, unless BM25's top score for this question (0 when nothing matches) is below the
    median of BM25 top scores over the questions this retriever was asked before (none before: closed);
    then rrf_rel_s1."""
    name = "gate_bm_med_s1"
    opened = 0
    asked = 0

    def __init__(self, graph) -> None:
        super().__init__(graph)
        self.history: list[float] = []

    def ask(self, text: str, k: int) -> list[str]:
        if k <= 0:
            return []
        rel = self.related_ranking(text)
        top = max(self.bm25.index.scores(text).values(), default=0.0)
        med = float(LS.np.median(self.history)) if self.history else None
        self.history.append(top)
        GateMedian.asked += 1
        if med is None or top >= med:
            return rel[:k]
        GateMedian.opened += 1
        return rrf(rel, self.static.ranking(text), 1.0)[:k]


R.METHODS["gate_bm_med_s1"] = GateMedian


class Related200(_Fused):
    """Reference: related's ranking asked with k = 200, cut to k (the ranking the fusions start from)."""
    name = "related200"

    def ask(self, text: str, k: int) -> list[str]:
        return self.related_ranking(text)[:k] if k > 0 else []


R.METHODS["related200"] = Related200

if __name__ == "__main__":
    rc = main(_argv)
    print(f"[gate_rel_s1: static fused in on {Gate.opened} of {Gate.asked} asks]", file=sys.stderr)
    print(f"[gate_bm_med_s1: static fused in on {GateMedian.opened} of {GateMedian.asked} asks]", file=sys.stderr)
    sys.exit(rc)
