"""Turning replay results into the seed's tables (text) or a JSON document."""

from __future__ import annotations

import os
import platform
from typing import Any

from soulgraph.eval.ledger import Ledger
from soulgraph.eval.locomo import CATEGORIES, KS, SESSION_KS, LocomoResult
from soulgraph.eval.replay import SIZE_BUCKETS, ReplayResult
from soulgraph.eval.scoring import latency_summary, long_range, summarize, summarize_hits

LEDGER_KS = (5, 10)
QUESTION_LABELS = {"built_on": "built on", "waiting_on": "waiting on"}


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }


# ----------------------------------------------------------------------- ledger
def ledger_report(ledger: Ledger, result: ReplayResult) -> dict[str, Any]:
    scores: dict[str, Any] = {}
    for kind in QUESTION_LABELS:
        asked = [q for q in result.questions if q.kind == kind]
        old = [lr for lr in (long_range(q) for q in asked) if lr is not None]
        scores[kind] = {
            "long_range": summarize(old, result.methods, LEDGER_KS),
            "all": summarize(asked, result.methods, LEDGER_KS),
        }
    return {
        "command": "ledger",
        "source": ledger.source,
        "machine": machine(),
        "ledger": {"entries": ledger.entries, "tasks": len(ledger.tasks), "problems": ledger.problems.to_dict()},
        "replay": {
            "seconds": result.seconds,
            "engine_seconds": result.engine_seconds,
            "question_seconds": sum(sum(v) for v in result.latencies.values()),
            "depth": result.depth,
            "waiting_on_declared_at": result.declared_at,
            "stats": dict(result.stats),
        },
        "scores": scores,
        "latency": {m: latency_summary(v) for m, v in result.latencies.items()},
        "latency_by_graph_size": _latency_by_size(result),
    }


def _bucket_name(size: int) -> str:
    low = 0
    for high in SIZE_BUCKETS:
        if size < high:
            return f"{low:,}-{high - 1:,} nodes"
        low = high
    return f">={low:,} nodes"


def _latency_by_size(result: ReplayResult) -> dict[str, Any]:
    buckets: dict[str, dict[str, list[float]]] = {}
    for method, seconds in result.latencies.items():
        for size, spent in zip(result.sizes, seconds):
            buckets.setdefault(_bucket_name(size), {}).setdefault(method, []).append(spent)
    return {name: {m: latency_summary(v) for m, v in per.items()} for name, per in buckets.items()}


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = []
    for n, row in enumerate([header, *rows]):
        cells = [str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def ledger_text(report: dict[str, Any]) -> str:
    methods = list(report["latency"])
    replay, ledger = report["replay"], report["ledger"]
    stats = replay["stats"]
    out = [
        f"Ledger {report['source']}: {ledger['tasks']:,} tasks replayed of {ledger['entries']:,} entries, "
        f"{stats.get('edges', 0):,} edges, {stats.get('updates', 0):,} updates, "
        f"{stats.get('asks', 0):,} tasks asked about",
        f"Replay: {replay['seconds']:.2f} s in all; engine (add, link, touch) {replay['engine_seconds']:.2f} s, "
        f"questions {replay['question_seconds']:.2f} s. Rankings {replay['depth']} deep; waiting-on "
        f"declarations dated by {replay['waiting_on_declared_at']}.",
    ]
    problems = dict(ledger["problems"]["counts"])
    if stats.get("edges refused (cycle)"):
        problems["edges refused: would close a cycle"] = stats["edges refused (cycle)"]
    out.append("Problems: " + ("; ".join(f"{k}: {v:,}" for k, v in problems.items()) if problems else "none"))
    out.append("")
    header = ["Question", "Questions", *methods]
    for split, title in (("long_range", "Long-range question"), ("all", "All questions")):
        rows = []
        for kind, label in QUESTION_LABELS.items():
            summary = report["scores"][kind][split]
            for metric, name in [*((f"recall@{k}", f"recall@{k}") for k in LEDGER_KS), ("mrr", "MRR")]:
                rows.append([f"{label}, {name}", f"{summary['questions']:,}",
                             *(_fmt(summary["methods"][m][metric]) for m in methods)])
        out.append(table([title, *header[1:]], rows))
        out.append("")
    out.append(_latency_text(report["latency"], report.get("latency_by_graph_size")))
    return "\n".join(out)


def _latency_text(latency: dict[str, Any], by_size: dict[str, Any] | None) -> str:
    rows = [[m, f"{s['questions']:,}", _fmt(s["p50_ms"], 3), _fmt(s["p99_ms"], 3), _fmt(s["mean_ms"], 3)]
            for m, s in latency.items()]
    text = table(["Latency per question (ms)", "asks", "p50", "p99", "mean"], rows)
    if by_size and len(by_size) > 1:
        methods = list(latency)
        size_rows = []
        for bucket, per in by_size.items():
            first = next(iter(per.values()))
            size_rows.append([bucket, f"{first['questions']:,}",
                              *(f"{_fmt(per[m]['p50_ms'], 3)} / {_fmt(per[m]['p99_ms'], 3)}" for m in methods)])
        text += "\n\n" + table(["p50 / p99 ms by graph size", "asks", *methods], size_rows)
    return text


# ----------------------------------------------------------------------- LoCoMo
def locomo_report(source: str, result: LocomoResult) -> dict[str, Any]:
    categories, session_categories = {}, {}
    for name in [*CATEGORIES.values(), *sorted({q.kind for q in result.questions} - set(CATEGORIES.values()))]:
        asked = [q for q in result.questions if q.kind == name]
        if asked:
            categories[name] = summarize(asked, result.methods, KS)
            session_categories[name] = summarize_hits([q for q in result.session_questions if q.kind == name],
                                                      result.methods, SESSION_KS)
    return {
        "command": "locomo",
        "source": source,
        "machine": machine(),
        "seconds": result.seconds,
        "stats": dict(result.stats),
        "problems": result.problems.to_dict(),
        "overall": summarize(result.questions, result.methods, KS),
        "by_category": categories,
        "sessions": {"overall": summarize_hits(result.session_questions, result.methods, SESSION_KS),
                     "by_category": session_categories},
        "latency": {m: latency_summary(v) for m, v in result.latencies.items()},
    }


def locomo_text(report: dict[str, Any]) -> str:
    methods = list(report["latency"])
    stats = report["stats"]
    problems = report["problems"]["counts"]
    out = [
        f"LoCoMo {report['source']}: {stats.get('conversations', 0)} conversations, {stats.get('sessions', 0):,} sessions, "
        f"{stats.get('turns', 0):,} turns ({stats.get('turns with an image caption', 0):,} with an image caption), "
        f"{stats.get('questions', 0):,} questions scored; {report['seconds']:.2f} s in all",
        "Problems: " + ("; ".join(f"{k}: {v:,}" for k, v in problems.items()) if problems else "none"),
        "",
    ]
    rows = []
    groups = [("all", report["overall"]), *report["by_category"].items()]
    for name, summary in groups:
        for k in KS:
            rows.append([f"{name}, R@{k}", f"{summary['questions']:,}",
                         *(_fmt(summary["methods"][m][f"recall@{k}"]) for m in methods)])
        rows.append([f"{name}, MRR", f"{summary['questions']:,}",
                     *(_fmt(summary["methods"][m]["mrr"]) for m in methods)])
    out.append(table(["Evidence recall", "Questions", *methods], rows))
    out.append("")
    sessions = report.get("sessions")
    if sessions:
        rows = []
        for name, summary in [("all", sessions["overall"]), *sessions["by_category"].items()]:
            for k in SESSION_KS:
                rows.append([f"{name}, hit@{k}", f"{summary['questions']:,}",
                             *(_fmt(summary["methods"][m][f"hit@{k}"]) for m in methods)])
            rows.append([f"{name}, MRR", f"{summary['questions']:,}",
                         *(_fmt(summary["methods"][m]["mrr"]) for m in methods)])
        out.append("Session level: a question counts at k when a session holding its evidence is among the "
                   "first k sessions, ranked by their best turn in the method's top turns.")
        out.append(table(["Evidence session", "Questions", *methods], rows))
        out.append("")
    out.append(_latency_text(report["latency"], None))
    return "\n".join(out)
