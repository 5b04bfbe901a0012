"""Query embedding latency of the distilled static model: tokenize + gather + mean + normalise, one thread.
Two tokenizers: HF `tokenizers` (tokenizer.json) and a pure-Python BERT WordPiece (vocab only)."""
import json, os, statistics, sys, time, unicodedata
sys.argv = [sys.argv[0]]; HERE = os.path.dirname(os.path.abspath(__file__)); sys.path.insert(0, HERE); sys.path.insert(0, os.path.join(os.path.dirname(HERE), "runtime"))
import numpy as np
import distill_static as distill
from tokenizers import Tokenizer
from soulgraph.eval.ledger import LedgerProblems
from soulgraph.eval.locomo import _sessions, read_locomo, turn_text

class PyWordPiece:
    """BertNormalizer(clean_text, handle_chinese_chars, lowercase, strip_accents=lowercase) +
    BertPreTokenizer (whitespace, then each punctuation char alone) + greedy longest-match WordPiece."""
    def __init__(self, vocab, unk="[UNK]", max_chars=100):
        self.v = vocab; self.unk = vocab[unk]; self.max = max_chars; self.cache = {}
    @staticmethod
    def _punct(ch):
        cp = ord(ch)
        if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126: return True
        return unicodedata.category(ch).startswith("P")
    @staticmethod
    def _cjk(cp):
        return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or 0x2A700 <= cp <= 0x2B73F
                or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)
    def normalize(self, text):
        out = []
        for ch in text:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD: continue
            cat = unicodedata.category(ch)
            if ch in "\t\n\r" or cat == "Zs": out.append(" "); continue
            if cat in ("Cc", "Cf"): continue
            if self._cjk(cp): out.append(f" {ch} "); continue
            out.append(ch)
        t = "".join(out).lower()
        if not t.isascii():
            t = "".join(c for c in unicodedata.normalize("NFD", t) if unicodedata.category(c) != "Mn")
        return t
    def words(self, t):
        for chunk in t.split():
            if chunk.isalnum() and chunk.isascii(): yield chunk; continue
            cur = []
            for ch in chunk:
                if self._punct(ch):
                    if cur: yield "".join(cur); cur = []
                    yield ch
                else: cur.append(ch)
            if cur: yield "".join(cur)
    def word_ids(self, w):
        r = self.cache.get(w)
        if r is not None: return r
        if len(w) > self.max: r = [self.unk]
        else:
            r, s = [], 0
            while s < len(w):
                e = len(w); hit = None
                while s < e:
                    sub = w[s:e] if s == 0 else "##" + w[s:e]
                    if sub in self.v: hit = self.v[sub]; break
                    e -= 1
                if hit is None: r = [self.unk]; break
                r.append(hit); s = e
        self.cache[w] = r
        return r
    def encode(self, text):
        ids = []
        for w in self.words(self.normalize(text)): ids += self.word_ids(w)
        return ids

tj = json.load(open(distill.tokenizer_path()))
hf = distill.load_tokenizer()
py = PyWordPiece(tj["model"]["vocab"])
texts, qs = [], []
for pos, s in enumerate(read_locomo(distill.DATA)):
    for _n, _s, _d, turns in _sessions(s["conversation"], LedgerProblems(), str(pos)): texts += [turn_text(t) for t in turns]
    qs += [qa["question"] for qa in s.get("qa") or [] if isinstance(qa, dict) and isinstance(qa.get("question"), str)]
mism = sum(hf.encode(t, add_special_tokens=False).ids != py.encode(t) for t in texts + qs)
rep = {"tokenizer_equivalence": {"texts_checked": len(texts) + len(qs), "mismatches": mism}}
Q = qs[:200]; assert len(set(Q)) == 200, len(set(Q))
V = os.path.join(distill.OUT, "variants")
for name in ("mean_384_none", "mean_256_none", "mean_128_none"):
    path = f"{V}/{name}.npy"
    t = time.perf_counter(); E = np.load(path); load = time.perf_counter() - t
    w = np.ones(E.shape[0], np.float32)  # a per-store weight vector (storesif) costs one extra gather
    r = {"size_MB": round(os.path.getsize(path) / 1e6, 2), "load_ms": round(load * 1000, 1), "dtype": str(E.dtype)}
    D = np.random.default_rng(0).standard_normal((300, E.shape[1])).astype(np.float32)  # ~one conversation
    def emb_hf(q):
        ids = hf.encode(q, add_special_tokens=False).ids
        v = (E[ids].astype(np.float32) * w[ids, None]).mean(0); return v / np.linalg.norm(v)
    def emb_py(q, py=py):
        ids = py.encode(q)
        v = (E[ids].astype(np.float32) * w[ids, None]).mean(0); return v / np.linalg.norm(v)
    for label, f in (("hf_tokenizers", emb_hf), ("pure_python_cold_cache", emb_py), ("pure_python_warm_cache", emb_py)):
        if label == "pure_python_cold_cache": py.cache.clear()
        for q in qs[300:340]: f(q)  # warm-up on other questions (pure-python cold: these words may be cached)
        if label == "pure_python_cold_cache": py.cache.clear()
        lat = []
        for q in Q:
            t = time.perf_counter(); f(q); lat.append(time.perf_counter() - t)
        lat.sort()
        r[label + "_ms"] = {"p50": round(lat[100] * 1000, 4), "p90": round(lat[180] * 1000, 4), "max": round(lat[-1] * 1000, 4)}
    lat = []
    for q in Q:
        t = time.perf_counter(); v = emb_hf(q); s = D @ v; np.argsort(-s)[:20]; lat.append(time.perf_counter() - t)
    lat.sort(); r["hf_embed_plus_search_300docs_ms_p50"] = round(lat[100] * 1000, 4)
    rep[name] = r
rep["mean_question_chars"] = round(statistics.fmean(len(q) for q in Q), 1)
rep["loadavg"] = open("/proc/loadavg").read().split()[:3]
print(json.dumps(rep, indent=1))
json.dump(rep, open(os.path.join(distill.OUT, "latency.json"), "w"), indent=1)
