"""The scanner's secret rules, measured: recall on the poison corpus, false alarms on benign text,
and cost, for the rules as they are and for the hand-written rules before the rule sets came in.

    .venv/bin/python bench/bench_secret_rules.py [--data ../shared/data] [--baseline 86ec1a4]
        [--misses]     # also list the dev records no rule refuses (rule id and kind, never the text)

Measured on:
- refused: `secrets-dev.jsonl` of the poison corpus, a record counts when the secret rules find
  anything in its text;
- false alarms: `benign_tricky-dev.jsonl` records with task "secret" (the rule sets' own near
  misses), every LoCoMo turn (as soulgraph.eval.locomo reads them: "speaker: text" plus the
  image caption) and every ledger record's title;
- cost: p50 of the secret pass over 300-character notes cut from LoCoMo turns, the whole `scan`
  on the same notes, and the worst of three 100 KB hostile texts (the rules' trigger pieces at
  random, as tests/test_scanner.py makes them).

The baseline is the secrets module at the given commit (the hand rules only), run on the same
texts in the same process.
"""

from __future__ import annotations

import argparse
import glob
import importlib.metadata
import importlib.util
import json
import os
import random
import string
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "runtime"))

from soulgraph.memory import scanner  # noqa: E402
from soulgraph.memory.scanner import secrets as current  # noqa: E402


def load_baseline(commit: str):
    source = subprocess.run(
        ["git", "show", f"{commit}:runtime/soulgraph/memory/scanner/secrets.py"], cwd=ROOT,
        capture_output=True, text=True, check=True, timeout=30).stdout
    spec = importlib.util.spec_from_loader("baseline_secrets", loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{commit}:secrets.py", "exec"), module.__dict__)
    return module


def runner_of(module):
    if hasattr(module, "find_secrets"):
        return module.find_secrets
    rules = module.SECRET_RULES
    return lambda text, low, folded: scanner._run(rules, text, low, folded)


def folded(text: str):
    f = text.lower()
    return text, (f if len(f) == len(text) else None), f


def locomo_turns(path: str) -> list[str]:
    out = []
    for name in sorted(glob.glob(os.path.join(path, "*.json"))):
        with open(name, encoding="utf-8") as f:
            for conv in json.load(f):
                for key, turns in conv.get("conversation", {}).items():
                    if not isinstance(turns, list):
                        continue
                    for t in turns:
                        text = f"{t.get('speaker', '?')}: {t.get('text', '')}".strip()
                        cap = t.get("blip_caption")
                        if isinstance(cap, str) and cap.strip():
                            text += f" [image: {cap.strip()}]"
                        out.append(text)
    return out


def ledger_titles(path: str) -> list[str]:
    out = []
    for name in sorted(glob.glob(os.path.join(path, "*.json"))):
        with open(name, encoding="utf-8") as f:
            for rec in json.load(f):
                if isinstance(rec, dict) and isinstance(rec.get("title"), str):
                    out.append(rec["title"])
    return out


def jsonl(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def notes_of(turns: list[str], n: int = 400, seed: int = 28) -> list[str]:
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        s = ""
        while len(s) < 300:
            s += rng.choice(turns) + " "
        out.append(s[:300])
    return out


PIECES = ["eyJ", "[", "](", "![", "://", ":", "@", "=", "password", "token=", "AKIA", "sk-",
          "ghp_", "-----BEGIN RSA PRIVATE KEY-----", "\n", " ", "ignore ", "previous ",
          "you are now ", "system:", "<|", "{", "}", "?q=", "\u200b", "\U000e0041", "a", "Z9",
          "send ", "to https://", "Bearer ", "xoxb-", "1234567890-"]
ALNUM = string.ascii_letters + string.digits


def hostile(seed: int, size: int = 100_000) -> str:
    rng = random.Random(seed)
    out, n = [], 0
    while n < size:
        piece = rng.choice(PIECES) if rng.random() < 0.5 else "".join(
            rng.choice(ALNUM + " .,;") for _ in range(rng.randint(1, 12)))
        out.append(piece)
        n += len(piece)
    return "".join(out)[:size]


def p50(fn, texts: list[str], reps: int = 7) -> float:
    best = []
    for t in texts:
        args = folded(t)
        runs = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn(*args)
            runs.append(time.perf_counter() - t0)
        best.append(min(runs))
    best.sort()
    return best[len(best) // 2] * 1e6


def worst_ms(fn, texts: list[str]) -> float:
    worst = 0.0
    for t in texts:
        args = folded(t)
        t0 = time.perf_counter()
        fn(*args)
        worst = max(worst, time.perf_counter() - t0)
    return worst * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.path.join(ROOT, os.pardir, "shared", "data"))
    ap.add_argument("--baseline", default="86ec1a4")
    ap.add_argument("--misses", action="store_true")
    args = ap.parse_args()

    secrets = jsonl(os.path.join(args.data, "poison", "secrets-dev.jsonl"))
    benign = [r["text"] for r in jsonl(os.path.join(args.data, "poison", "benign_tricky-dev.jsonl"))
              if r.get("task") == "secret"]
    turns = locomo_turns(os.path.join(args.data, "locomo"))
    titles = ledger_titles(os.path.join(args.data, "ledgers"))
    notes = notes_of(turns)
    attacks = [hostile(s) for s in (1, 2, 3)]

    runs = {"before (" + args.baseline + ")": runner_of(load_baseline(args.baseline)),
            "after": runner_of(current)}
    rows = []
    for name, run in runs.items():
        hits = [bool(run(*folded(r["text"]))) for r in secrets]
        fp_b = sum(bool(run(*folded(t))) for t in benign)
        fp_l = sum(bool(run(*folded(t))) for t in turns)
        fp_t = sum(bool(run(*folded(t))) for t in titles)
        rows.append((name, sum(hits), fp_b, fp_l, fp_t, p50(run, notes), worst_ms(run, attacks)))
        if args.misses and name == "after":
            for r, h in zip(secrets, hits):
                if not h:
                    print(f"  missed: {r['rule_id']} ({r['source'].split(':')[0]})")
    whole = p50(lambda text, low, f: scanner.scan(text), notes)
    whole_hostile = worst_ms(lambda text, low, f: scanner.scan(text), attacks)
    # the same, with the package's runner handing the secret rules to find_secrets (as the
    # scanner does when scan() calls it for them)
    run_rules = scanner._run

    def dispatch(rules, text, low, folded):
        if rules is current.SECRET_RULES:
            return current.find_secrets(text, low, folded)
        return run_rules(rules, text, low, folded)

    scanner._run = dispatch
    try:
        via = p50(lambda text, low, f: scanner.scan(text), notes)
        via_hostile = worst_ms(lambda text, low, f: scanner.scan(text), attacks)
    finally:
        scanner._run = run_rules

    print(f"secret rules: {len(current.SECRET_RULES)} ({len(current.HAND_RULES)} hand-written, "
          f"{len(current.DATA_RULES)} from the rule sets)")
    print(f"| rules | refused (of {len(secrets)}) | benign look-alikes flagged (of {len(benign)}) "
          f"| LoCoMo turns flagged (of {len(turns)}) | ledger titles flagged (of {len(titles)}) "
          "| p50 µs, 300-char note | 100 KB hostile, ms |")
    print("|---|---|---|---|---|---|---|")
    for name, ok, fb, fl, ft, us, ms in rows:
        print(f"| {name} | {ok} ({ok / len(secrets):.1%}) | {fb} ({fb / len(benign):.1%}) "
              f"| {fl} ({fl / len(turns):.2%}) | {ft} ({ft / len(titles):.2%}) | {us:.1f} | {ms:.1f} |")
    print(f"whole scan (secrets + injections, as installed): p50 {whole:.1f} µs per 300-char note, "
          f"100 KB hostile {whole_hostile:.1f} ms")
    print(f"whole scan with the secret rules run by find_secrets: p50 {via:.1f} µs, "
          f"100 KB hostile {via_hostile:.1f} ms")
    detect_secrets_as_a_dependency(notes[:100], secrets, benign)
    return 0


def detect_secrets_as_a_dependency(notes, secrets, benign) -> None:
    """detect-secrets' own scanner (all plugins and filters, default settings), if installed:
    the alternative to shipping its patterns as data."""
    try:
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import default_settings
    except ImportError:
        print("detect-secrets as a dependency: not installed here (pip install detect-secrets==1.5.0 "
              "in another environment and run this script there to measure it)")
        return
    with default_settings():
        list(scan_line("warm up"))
        times = []
        for t in notes:
            t0 = time.perf_counter()
            list(scan_line(t))
            times.append(time.perf_counter() - t0)
        times.sort()
        refused = sum(any(True for _ in scan_line(r["text"])) for r in secrets)
        flagged = sum(any(True for _ in scan_line(t)) for t in benign)
    print(f"detect-secrets {importlib.metadata.version('detect-secrets')} as a dependency: "
          f"refused {refused} of {len(secrets)}, look-alikes flagged {flagged} of {len(benign)}, "
          f"p50 {times[len(times) // 2] * 1e6:.0f} µs per 300-char note")


if __name__ == "__main__":
    sys.exit(main())
