"""Ledger replay with two extra retrievers registered at runtime (the repo is not edited).

  static      cosine of the question's static vector (distill/variants/mean_384_wfsif.npy) against
              every added node's vector; ties newest first (same rule as the harness's top_k).
  static_rrf  reciprocal rank fusion (k = 60, equal weights) of the full `static` ranking and the
              full ranking of the harness's own BM25 retriever (every node BM25 scores, ties newest
              first); fused ties go to the better static rank.

A text's vector = mean of its WordPiece token rows (tokenizer with no_padding()/no_truncation(),
add_special_tokens=False, so no [CLS]/[SEP]), L2-normalised -- as in distill_static.py / eval_static.py.

The registration mutates soulgraph.eval.retrievers.METHODS in place; the harness's replay_ledger ->
make_retrievers reads that same dict, so the harness's own replay loop and report code run unchanged.

Run (in the venv of bench/distill_static.py, after it; docs/embedding-candidates.md):
  OMP_NUM_THREADS=1 nice -n 19 /tmp/embed/bin/python bench/ledger_static.py [ledger.json ...]
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "runtime"))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import distill_static as distill  # noqa: E402  (load_tokenizer, paths; importing runs nothing)
from soulgraph.eval import retrievers as R  # noqa: E402
from soulgraph.eval.ledger import read_ledger  # noqa: E402
from soulgraph.eval.replay import replay_ledger  # noqa: E402
from soulgraph.eval.report import ledger_report, ledger_text  # noqa: E402

VARIANT = os.path.join(distill.OUT, "variants", "mean_384_wfsif.npy")
E = np.load(VARIANT).astype(np.float32)
TOK = distill.load_tokenizer()
RRF_K = 60


def embed(text: str) -> np.ndarray:
    ids = TOK.encode(text, add_special_tokens=False).ids
    v = E[np.asarray(ids, np.int64)].mean(0) if ids else np.zeros(E.shape[1], np.float32)
    n = float(np.linalg.norm(v))
    return v / max(n, 1e-12)


class Static(R._SequencedRetriever):
    name = "static"

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.mat = np.zeros((64, E.shape[1]), np.float32)

    def index_text(self, node_id: str, text: str) -> None:
        n = len(self.ids)
        if n == len(self.mat):
            self.mat = np.concatenate([self.mat, np.zeros_like(self.mat)])
        self.mat[n] = embed(text)
        self.ids.append(node_id)

    def ranking(self, text: str) -> list[str]:
        n = len(self.ids)
        if n == 0:
            return []
        s = self.mat[:n] @ embed(text)
        order = np.lexsort((-np.arange(n), -s))  # best cosine first, ties newest first
        return [self.ids[i] for i in order]

    def ask(self, text: str, k: int) -> list[str]:
        return self.ranking(text)[:k] if k > 0 else []


class StaticRRF(R.Retriever):
    name = "static_rrf"

    def __init__(self) -> None:
        self.static = Static()
        self.bm25 = R.BM25()

    def observe_add(self, node_id: str, text: str, at: float) -> None:
        self.static.observe_add(node_id, text, at)
        self.bm25.observe_add(node_id, text, at)

    def ask(self, text: str, k: int) -> list[str]:
        vec = self.static.ranking(text)
        scores = self.bm25.index.scores(text)
        bm = R.top_k(scores, len(scores), self.bm25.seq)
        fused: dict[str, float] = {}
        for ranking in (vec, bm):
            for i, d in enumerate(ranking, 1):
                fused[d] = fused.get(d, 0.0) + 1.0 / (RRF_K + i)
        first = {d: i for i, d in enumerate(vec)}
        return sorted(fused, key=lambda d: (-fused[d], first.get(d, 10**9)))[:k]


R.METHODS["static"] = lambda graph: Static()
R.METHODS["static_rrf"] = lambda graph: StaticRRF()

METHODS = ["bm25", "semantic_search", "related", "static", "static_rrf"]
LEDGERS = sys.argv[1:] or [os.path.join(os.path.dirname(distill.REPO), "shared", "data", "ledgers", f"{n}_ledger.json")
                           for n in ("peps", "eips", "keps")]

if __name__ == "__main__":
    methods = R.parse_methods(",".join(METHODS))  # same validation the CLI does
    out = {}
    for path in LEDGERS:
        # identical to soulgraph.eval.__main__.main for `ledger FILE --methods ...` (defaults: depth 10, meta)
        ledger = read_ledger(path)
        result = replay_ledger(ledger, methods, depth=10, use_declared_at=True)
        report = ledger_report(ledger, result)
        print(ledger_text(report), flush=True)
        print()
        out[path] = report
    json.dump(out, open(os.path.join(distill.OUT, "ledger_static_results.json"), "w"), indent=1)
