"""LoCoMo as a Hermes user would live it: through the memory provider, not the engine.

`python -m soulgraph.eval provider FILE [--budget 1500] [--limit 8]`. Each conversation gets
a fresh soul file and the memory service the provider's shim talks to
(`hermes/memory_service.py`), its clock set to the conversation's dates. Every turn goes in
through `sync_turn` as the user's words (`Speaker: text`, one Hermes session per LoCoMo
session); each session ends with `consolidate`, as `on_session_end` does. Then every question
is asked through `recall`, the text `prefetch` would inject before the turn (at most `limit`
memories within `budget` characters), and scored on what was injected: a turn memory counts
as its LoCoMo turn, a memory consolidation promoted from a turn counts as that turn.

Beside it, in the same run, the harness's direct figures for the same questions (the graph
built from the turns by `eval/locomo.py`, `recall` and `recall_related`, 20 deep): how much
of what the graph can find makes it into a 1,500-character prompt block.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from soulgraph.eval.locomo import _sessions, replay_locomo, scorable_questions, turn_text
from soulgraph.eval.ledger import LedgerProblems
from soulgraph.eval.scoring import Question, reciprocal_rank, recall_at
from soulgraph.hermes.memory_service import RECALL_BUDGET, RECALL_LIMIT, MemoryService
from soulgraph.store import SoulFile
from soulgraph.store.vectors import VectorStore, vectors_path

METHOD = "provider"
DIRECT = ["recall", "recall_related"]


class _Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def replay(data: list[dict[str, Any]], budget: int = RECALL_BUDGET, limit: int = RECALL_LIMIT) -> dict[str, Any]:
    problems = LedgerProblems()
    stats: Counter = Counter()
    questions: list[Question] = []
    latencies: list[float] = []
    injected_chars: list[int] = []
    injected_items: list[int] = []
    started = time.perf_counter()
    for position, sample in enumerate(data):
        if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
            continue
        where = str(sample.get("sample_id", f"entry {position}"))
        clock = _Clock()
        with tempfile.TemporaryDirectory(prefix="soulgraph-locomo-") as folder:
            soul = SoulFile(Path(folder) / "soul.json", clock=clock)
            # The vectors built inline (not in the background), so every question sees them and
            # the figures do not depend on timing; without numpy, lexical as on such a host.
            service = MemoryService(soul, vectors=VectorStore(vectors_path(soul.path), background=False))
            turn_of: dict[str, str] = {}  # memory id -> LoCoMo dia_id
            turns: set[str] = set()
            for number, start, _date, session_turns in _sessions(sample["conversation"], problems, where):
                session_id = f"{where}-session-{number}"
                for offset, turn in enumerate(session_turns, 1):
                    dia_id = turn.get("dia_id") if isinstance(turn, dict) else None
                    if not isinstance(dia_id, str) or not dia_id or dia_id in turns:
                        continue
                    clock.now = start + offset
                    written = service.sync_turn(user=turn_text(turn), session_id=session_id, platform="locomo")
                    if written.get("id"):
                        turn_of[written["id"]] = dia_id
                        turns.add(dia_id)
                        stats["turns"] += 1
                clock.now += 1
                kept = service.consolidate(session_id=session_id)
                graph = service.soul.graph()
                for added in kept["added"]:
                    parent = next(iter(graph.parents.get(added["id"], ())), None)
                    if parent in turn_of:
                        turn_of[added["id"]] = turn_of[parent]
                stats["promoted"] += len(kept["added"])
                stats["sessions"] += 1
            for subject, category, text, evidence in scorable_questions(sample, turns, problems, where):
                question = Question(category, subject, clock.now, {e: 0.0 for e in evidence})
                t0 = time.perf_counter()
                answer = service.recall(query=text, budget=budget, limit=limit)
                latencies.append(time.perf_counter() - t0)
                injected_chars.append(len(answer["text"]))
                injected_items.append(len(answer["ids"]))
                ranked = list(dict.fromkeys(turn_of[i] for i in answer["ids"] if i in turn_of))
                question.record(METHOD, ranked)
                questions.append(question)
        stats["conversations"] += 1
    seconds = time.perf_counter() - started
    direct = replay_locomo(data, DIRECT)
    by_subject = {q.subject: q for q in direct.questions}
    for question in questions:
        other = by_subject.get(question.subject)
        if other is not None:
            question.ranks.update(other.ranks)
    return {"questions": questions, "stats": stats, "seconds": seconds, "latencies": latencies,
            "injected_chars": injected_chars, "injected_items": injected_items, "budget": budget, "limit": limit}


def text(source: str, result: dict[str, Any]) -> str:
    questions: list[Question] = result["questions"]
    stats = result["stats"]
    lines = [f"LoCoMo {source} through the memory provider: {stats['conversations']} conversations, "
             f"{stats['sessions']} sessions, {stats['turns']:,} turns through sync_turn, {stats['promoted']:,} "
             f"memories promoted by consolidation, {len(questions):,} questions; {result['seconds']:.1f} s",
             f"Injected per question (budget {result['budget']:,} characters, at most {result['limit']} memories): "
             f"{_mean(result['injected_items']):.1f} memories, {_mean(result['injected_chars']):,.0f} characters on average; "
             f"recall p50 {_pct(result['latencies'], 0.5) * 1e3:.2f} ms, p99 {_pct(result['latencies'], 0.99) * 1e3:.2f} ms",
             ""]
    groups = [("all", questions)] + sorted(
        ((kind, [q for q in questions if q.kind == kind]) for kind in {q.kind for q in questions}), key=lambda g: g[0])
    header = ("Evidence recall", "Questions", "injected", "injected R@1", "injected MRR",
              "recall R@5", "recall R@10", "related R@10")
    rows = []
    for name, group in groups:
        n = len(group)
        rows.append((name, f"{n:,}",
                     _avg(group, lambda q: recall_at(q, METHOD, result["limit"])),
                     _avg(group, lambda q: recall_at(q, METHOD, 1)),
                     _avg(group, lambda q: reciprocal_rank(q, METHOD)),
                     _avg(group, lambda q: recall_at(q, "recall", 5)),
                     _avg(group, lambda q: recall_at(q, "recall", 10)),
                     _avg(group, lambda q: recall_at(q, "recall_related", 10))))
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines.append("  ".join(str(h).ljust(w) if i == 0 else str(h).rjust(w) for i, (h, w) in enumerate(zip(header, widths))))
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
    return "\n".join(lines)


def _avg(group: list[Question], score) -> str:
    return f"{sum(score(q) for q in group) / len(group):.2f}" if group else "-"


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered))) - 1))]
