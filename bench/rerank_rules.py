"""Re-ranker rules: the static vectors add no candidates, they only reorder `related`'s own top N.
Registered into soulgraph.eval.retrievers.METHODS at run time (imports fusion_rules, which imports
ledger_static), then the harness's own CLI runs. The repo is not edited.

Run (same argv as `python -m soulgraph.eval ...`):
  OMP_NUM_THREADS=1 nice -n 19 /tmp/embed/bin/python bench/rerank_rules.py \
    locomo ../shared/data/locomo/locomo-dev.json --methods related,rr20_w05,rr50_w05,lin20_a03

For an ask with k: rel = graph.related(text, max(k, N)); the first N of rel (session nodes included,
exactly as related returns them; the LoCoMo replay drops session nodes itself) are reordered, the
rest of rel follows unchanged, and the first k are returned.
  rrN_wW   : score = 1/(60+rank_related) + W/(60+rank_static within the N)   (static rank within the
             window = ledger_static's full static ranking, ties newest first, restricted to the window)
  linN_aA  : score = (1-A)*(1 - (rank_related-1)/N) + A*cos_minmax, cos_minmax = the candidate's cosine
             min-max scaled over the window (all equal -> 0)
  ties -> better related rank.
  relN     : reference, related(text, max(k, N))[:k]
"""
from __future__ import annotations

import sys

_argv = sys.argv[1:]
sys.argv = [sys.argv[0]]
import fusion_rules as F  # noqa: E402  (registers fusion methods + static; its main block not run)
LS = F.LS
R = F.R
np = LS.np


class _Rerank(F._Fused):
    N = 20

    def window(self, text: str, k: int) -> tuple[list[str], list[str]]:
        rel = [h.node.id for h in self.graph.related(text, max(k, self.N))]
        return rel[: self.N], rel[self.N:]


def make_rrf(n: int, w: float, name: str):
    class RR(_Rerank):
        N = n

        def ask(self, text: str, k: int) -> list[str]:
            if k <= 0:
                return []
            head, tail = self.window(text, k)
            inwin = set(head)
            srank = {d: i for i, d in enumerate((d for d in self.static.ranking(text) if d in inwin), 1)}
            score = {d: 1.0 / (F.RRF_K + i) + w / (F.RRF_K + srank.get(d, 10**9))
                     for i, d in enumerate(head, 1)}
            rpos = {d: i for i, d in enumerate(head)}
            head = sorted(head, key=lambda d: (-score[d], rpos[d]))
            return (head + tail)[:k]
    RR.name = name
    return RR


def make_lin(n: int, a: float, name: str):
    class Lin(_Rerank):
        N = n

        def ask(self, text: str, k: int) -> list[str]:
            if k <= 0:
                return []
            head, tail = self.window(text, k)
            if not head:
                return tail[:k]
            row = {d: i for i, d in enumerate(self.static.ids)}
            q = LS.embed(text)
            cos = np.array([float(self.static.mat[row[d]] @ q) if d in row else 0.0 for d in head])
            span = float(cos.max() - cos.min())
            cn = (cos - cos.min()) / span if span > 0 else np.zeros_like(cos)
            score = {d: (1 - a) * (1 - i / n) + a * float(cn[i]) for i, d in enumerate(head)}
            rpos = {d: i for i, d in enumerate(head)}
            head = sorted(head, key=lambda d: (-score[d], rpos[d]))
            return (head + tail)[:k]
    Lin.name = name
    return Lin


def make_ref(n: int, name: str):
    class Ref(_Rerank):
        N = n

        def ask(self, text: str, k: int) -> list[str]:
            if k <= 0:
                return []
            head, tail = self.window(text, k)
            return (head + tail)[:k]
    Ref.name = name
    return Ref


for _n, _w, _name in ((20, 0.5, "rr20_w05"), (20, 1.0, "rr20_w1"), (50, 0.5, "rr50_w05")):
    R.METHODS[_name] = make_rrf(_n, _w, _name)
R.METHODS["lin20_a03"] = make_lin(20, 0.3, "lin20_a03")
for _n in (20, 50):
    R.METHODS[f"rel{_n}"] = make_ref(_n, f"rel{_n}")

if __name__ == "__main__":
    sys.exit(F.main(_argv))
