"""Hermes' bundled `holographic` memory provider as a retrieval peer on LoCoMo, beside ours.

    nice -n 19 .venv/bin/python bench/peer_holographic.py [--limit-conversations N] [--ask 20]

What it measures: the harness units of soulgraph/eval/locomo.py. Our methods `bm25` and `related`
run through `replay_locomo` in this process; its questions (same evidence cleaning, same skips)
are then put to holographic and recorded into the same `Question` objects, so every figure
comes from soulgraph.eval.scoring / report (turn R@1/5/10/20, MRR over the top 20; session
hit@1/3/5/10 and MRR with sessions ranked by their best turn, `sessions_in_order`).

How holographic runs: in Hermes' own venv (tests/hermes_client.py finds it), one child process
per conversation (this file with `--child`, JSON on stdin/stdout, a subprocess deadline), in a
fresh throwaway HOME = HERMES_HOME with no provider keys and a dead proxy (hermes_env), and with
Python sockets refused inside the child (attempts are counted and printed). The provider is
loaded by Hermes' loader, `plugins.memory.load_memory_provider("holographic")`, with its default
config (no config.yaml), then `initialize(session_id=...)`. Both directions go through the tool it
exposes to the model, `provider.handle_tool_call("fact_store", args)`:
  - each turn, in order: {"action": "add", "content": turn_text(turn)}  (category "general");
    the returned fact_id is mapped back to the turn's dia_id;
  - each question, after the whole conversation: {"action": "search", "query": question,
    "limit": ASK} (ASK = 20 by default; min_trust stays at the provider's 0.3). That is
    FactRetriever.search: FTS5 OR-query over the facts (limit*3 candidates), reranked by
    0.6*FTS rank (normalised by the best candidate) + 0.4*token Jaccard, times trust.
    When fewer than ASK come back, what came back is scored (counted below the table).

Differs from Hermes in use: the model would choose what to add (here: every turn, verbatim) and
when to search, with its own query and usually limit=10 (the schema's default); `prefetch` is the
same search with limit=5, injected as text. No `fact_feedback` ever happens, so every trust score
stays at the default 0.5 and multiplies every score alike (ranking unchanged). Hermes 0.19.0 does
not depend on numpy and its venv has none, so the HRR term (weight 0.3) is off and the provider
reweights to FTS 0.6 / Jaccard 0.4 by itself; `probe`/`related`/`reason` (HRR entity algebra) are
not exercised. `limit` changes the candidate pool and the normalisation, so the top 10 of a
limit=20 search can differ slightly from a limit=10 search. No embeddings, no LLM, no network.

With numpy in the Hermes venv the provider turns on its HRR vector term (weights fts 0.4, jaccard
0.3, hrr 0.3 instead of 0.6 / 0.4 / 0): pass that venv's python as --hermes-python. In
hermes-agent 0.19.0 the term barely moves any figure (docs/eval.md), and adds cost 18 times slower.

What it does not prove: anything about answer quality (no reader model), about holographic with
facts an agent would have distilled, or about other datasets.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
OURS = ["bm25", "related"]
PEER = "holographic"


# ------------------------------------------------------------------ child (Hermes' venv)
def child() -> int:
    """Read {"turns": [[dia_id, text]], "questions": [[subject, text]], "ask": n}; print rankings."""
    attempts: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(repr(args[:2])[:120])
        raise OSError("network refused by peer_holographic --child")

    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.create_connection = refuse  # type: ignore[assignment]
    socket.getaddrinfo = refuse  # type: ignore[assignment]

    job = json.load(sys.stdin)
    from importlib.metadata import version

    from plugins.memory import load_memory_provider

    provider = load_memory_provider(PEER)
    if provider is None:
        raise SystemExit("holographic provider did not load")
    provider.initialize(session_id="locomo")
    retriever = provider._retriever  # read only, to report the weights in use
    dia_of: dict[int, str] = {}
    collapsed: list[str] = []  # turns whose text was already stored (add returns the old id)
    t0 = time.perf_counter()
    for dia_id, text in job["turns"]:
        fact_id = json.loads(provider.handle_tool_call("fact_store", {"action": "add", "content": text}))["fact_id"]
        if fact_id in dia_of:
            collapsed.append(dia_id)
        else:
            dia_of[fact_id] = dia_id
    add_seconds = time.perf_counter() - t0
    ranked: dict[str, list[str]] = {}
    seconds: dict[str, float] = {}
    errors: dict[str, str] = {}
    for subject, question in job["questions"]:
        t0 = time.perf_counter()
        reply = json.loads(provider.handle_tool_call(
            "fact_store", {"action": "search", "query": question, "limit": job["ask"]}))
        seconds[subject] = time.perf_counter() - t0
        if "results" not in reply:
            errors[subject] = str(reply)[:200]
        ranked[subject] = [dia_of[r["fact_id"]] for r in reply.get("results", [])]
    provider.shutdown()
    json.dump({
        "version": version("hermes-agent"),
        "weights": {"fts": retriever.fts_weight, "jaccard": retriever.jaccard_weight, "hrr": retriever.hrr_weight},
        "facts": len(dia_of), "collapsed": collapsed, "add_seconds": add_seconds,
        "ranked": ranked, "seconds": seconds, "errors": errors, "network_attempts": attempts,
    }, sys.stdout)
    return 0


# ------------------------------------------------------------------ parent (our .venv)
def conversation_jobs(data: list[dict[str, Any]], asked: set[str]) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """Per conversation: the child's job (turns as the replay stores them, the replay's
    questions) and the turn -> session map. Mirrors replay_locomo's turn and question walk."""
    from soulgraph.eval.ledger import LedgerProblems
    from soulgraph.eval.locomo import _sessions, turn_text

    jobs = []
    for position, sample in enumerate(data):
        if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
            continue
        where = str(sample.get("sample_id", f"entry {position}"))
        turns: list[list[str]] = []
        session_of: dict[str, str] = {}
        for number, _start, _date, session_turns in _sessions(sample["conversation"], LedgerProblems(), where):
            for turn in session_turns:
                dia_id = turn.get("dia_id") if isinstance(turn, dict) else None
                if not isinstance(dia_id, str) or not dia_id or dia_id in session_of:
                    continue  # the replay skips these too
                turns.append([dia_id, turn_text(turn)])
                session_of[dia_id] = f"session_{number}"
        questions = [[f"{where} q{n}", qa["question"]] for n, qa in enumerate(sample.get("qa") or [])
                     if f"{where} q{n}" in asked]
        jobs.append(({"turns": turns, "questions": questions}, session_of))
    return jobs


def run_child(python: Path, job: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One conversation in a fresh throwaway Hermes home, under a deadline."""
    from tests.hermes_client import hermes_env

    with tempfile.TemporaryDirectory(prefix="peer-holo-") as home:
        proc = subprocess.run([str(python), "-I", str(Path(__file__).resolve()), "--child"],
                              input=json.dumps(job), capture_output=True, text=True, timeout=timeout,
                              env=hermes_env(Path(home), user_home=Path(home)), cwd=home)
    if proc.returncode != 0:
        raise RuntimeError(f"child failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def markdown(report: dict[str, Any], methods: list[str]) -> str:
    """Overall and per category: turn R@k and MRR, then session hit@k and MRR."""
    from soulgraph.eval.locomo import KS, SESSION_KS

    def cell(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    lines = [f"| group | metric | questions | {' | '.join(methods)} |", "|---|---|---:|" + "---:|" * len(methods)]
    sections = [("turn", report["overall"], report["by_category"], [(f"R@{k}", f"recall@{k}") for k in KS]),
                ("session", report["sessions"]["overall"], report["sessions"]["by_category"],
                 [(f"hit@{k}", f"hit@{k}") for k in SESSION_KS])]
    for unit, overall, by_category, metrics in sections:
        for name, summary in [("all", overall), *by_category.items()]:
            for label, key in [*metrics, ("MRR", "mrr")]:
                scores = " | ".join(cell(summary["methods"][m][key]) for m in methods)
                lines.append(f"| {name} | {unit} {label} | {summary['questions']} | {scores} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--file", default=str(DATA))
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--ask", type=int, default=20, help="fact_store search limit (default 20)")
    parser.add_argument("--timeout", type=float, default=900.0, help="deadline per conversation child (s)")
    parser.add_argument("--hermes-python", default=None, help="default: the Hermes venv of tests/hermes_client.py")
    args = parser.parse_args()
    if args.child:
        return child()

    sys.path.insert(0, str(REPO / "runtime"))
    sys.path.insert(0, str(REPO))
    from soulgraph.eval.locomo import KS, read_locomo, replay_locomo, sessions_in_order
    from soulgraph.eval.report import _latency_text, locomo_report
    from tests.hermes_client import hermes_venv_dir

    python = Path(args.hermes_python) if args.hermes_python else hermes_venv_dir() / "bin" / "python"
    started = time.perf_counter()
    data = read_locomo(args.file)[: args.limit_conversations]
    result = replay_locomo(data, OURS)
    ours_seconds = result.seconds
    questions = {q.subject: q for q in result.questions}
    by_session = {q.subject: q for q in result.session_questions}
    result.methods = [PEER, *OURS]
    result.latencies = {PEER: [], **result.latencies}
    short, empty, errors, attempts, collapsed, adding = 0, 0, {}, [], [], 0.0
    version, weights = "?", {}
    for job, session_of in conversation_jobs(data, set(questions)):
        job["ask"] = args.ask
        out = run_child(python, job, args.timeout)
        version, weights = out["version"], out["weights"]
        errors.update(out["errors"])
        attempts += out["network_attempts"]
        collapsed += out["collapsed"]
        adding += out["add_seconds"]
        for subject, _text in job["questions"]:
            ranked = out["ranked"][subject][: max(KS)]
            short += len(ranked) < max(KS)
            empty += not ranked
            questions[subject].record(PEER, ranked)
            by_session[subject].record(PEER, sessions_in_order(ranked, session_of))
            result.latencies[PEER].append(out["seconds"][subject])
    report = locomo_report(args.file, result)
    stats = report["stats"]

    print(f"LoCoMo {args.file}: {stats.get('conversations', 0)} conversations, {stats.get('turns', 0):,} turns, "
          f"{len(result.questions):,} questions scored. hermes-agent {version}, holographic via "
          f"fact_store add/search (limit={args.ask}), weights {weights}.")
    print(f"Time: {time.perf_counter() - started:.1f} s in all; ours (replay, both methods) {ours_seconds:.1f} s; "
          f"holographic adds {adding:.1f} s.")
    print(f"holographic returned fewer than {max(KS)} turns for {short} of {len(result.questions)} questions "
          f"(none for {empty}; all of these are scored as returned); "
          f"tool errors {len(errors)}; turns collapsed as duplicate text {len(collapsed)}; "
          f"network attempts {len(attempts)}.")
    for subject, message in list(errors.items())[:5]:
        print(f"  error {subject}: {message}")
    print()
    print(markdown(report, result.methods))
    print()
    print(_latency_text(report["latency"], None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
