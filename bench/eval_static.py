"""Score distilled static variants on LoCoMo dev exactly like bench/embed_survey.py (vector-only and RRF k=60 with BM25)."""
import glob, json, os, sys
sys.argv = [sys.argv[0]]
HERE = os.path.dirname(os.path.abspath(__file__)); sys.path.insert(0, HERE); sys.path.insert(0, os.path.join(os.path.dirname(HERE), "runtime"))
import embed_survey as measure  # noqa: blocks network, gives metrics/rrf/summarise
import numpy as np
from tokenizers import Tokenizer
from soulgraph.eval.bm25 import BM25Index
from soulgraph.eval.ledger import LedgerProblems
from soulgraph.eval.locomo import CATEGORIES, _sessions, evidence_ids, read_locomo, turn_text
import distill_static as distill

data = read_locomo(measure.DATA); problems = LedgerProblems(); convs = []
for pos, sample in enumerate(data):
    where = str(sample.get("sample_id", pos)); ids, texts = [], []
    for number, _s, _d, turns in _sessions(sample["conversation"], problems, where):
        for turn in turns:
            d = turn.get("dia_id")
            if isinstance(d, str) and d and d not in ids:
                ids.append(d); texts.append(turn_text(turn))
    qs = []
    for n, qa in enumerate(sample.get("qa") or []):
        if not isinstance(qa, dict) or not isinstance(qa.get("question"), str): continue
        ev = evidence_ids(qa.get("evidence"), set(ids), problems, f"{where} q{n}")
        if ev: qs.append((qa["question"], ev, CATEGORIES.get(qa.get("category"), str(qa.get("category")))))
    convs.append((where, ids, texts, qs))
print("turns", sum(len(c[1]) for c in convs), "questions", sum(len(c[3]) for c in convs), file=sys.stderr)

tok = distill.load_tokenizer()
def ids_of(texts): return [np.array(e.ids, np.int64) for e in tok.encode_batch(list(texts), add_special_tokens=False)]
# BM25 rankings once
bm = []
for where, ids, texts, qs in convs:
    idx = BM25Index()
    for d, tx in zip(ids, texts): idx.add(d, tx)
    r = []
    for q in qs:
        sc = idx.scores(q[0]); r.append(sorted(sc, key=lambda d: -sc[d]))
    bm.append(r)
tok_docs = [ids_of(c[2]) for c in convs]; tok_qs = [ids_of([q[0] for q in c[3]]) for c in convs]

def embed(E, idl):
    out = np.zeros((len(idl), E.shape[1]), np.float32)
    for i, t in enumerate(idl):
        if len(t): out[i] = E[t].astype(np.float32).mean(0)
    return out / np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-12, None)

res = {}
def store_w(ci, n, a=1e-3):
    """per-store SIF: token probabilities from the searched conversation's own turns only (no labels, no queries)"""
    c = np.zeros(n); allids = np.concatenate(tok_docs[ci]); np.add.at(c, allids, 1); p = c / c.sum()
    return (a / (a + p)).astype(np.float32)[:, None]
jobs = []
for path in sorted(glob.glob(os.path.join(distill.OUT, "variants", "*.npy"))):
    name = os.path.basename(path)[:-4]; jobs.append((name, path, False))
    if name.endswith("_none"): jobs.append((name.replace("_none", "_storesif"), path, True))
for name, path, storesif in jobs:
    E0 = np.load(path)
    rows = {"vector": [], "rrf": []}
    for ci, (where, ids, texts, qs) in enumerate(convs):
        E = (E0.astype(np.float32) * store_w(ci, E0.shape[0])) if storesif else E0
        S = embed(E, tok_qs[ci]) @ embed(E, tok_docs[ci]).T
        for qi, (qt, ev, cat) in enumerate(qs):
            vec = [ids[j] for j in np.argsort(-S[qi], kind="stable")]
            rows["vector"].append({"cat": cat, **measure.metrics(vec, ev)})
            rows["rrf"].append({"cat": cat, **measure.metrics(measure.rrf(vec, bm[ci][qi]), ev)})
    res[name] = {k: measure.summarise(v) for k, v in rows.items()}
    v, f = res[name]["vector"], res[name]["rrf"]
    print(f"{name:20s} vec R@1 {v['R@1']:.3f} R@5 {v['R@5']:.3f} R@10 {v['R@10']:.3f} R@20 {v['R@20']:.3f} MRR20 {v['MRR@20']:.3f} | rrf R@10 {f['R@10']:.3f} MRR20 {f['MRR@20']:.3f}", flush=True)
json.dump({"net_attempts": measure.NET_ATTEMPTS, "results": res}, open(os.path.join(distill.OUT, "eval_results.json"), "w"), indent=1)
