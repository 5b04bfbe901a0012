"""LoCoMo as a Hermes user would live it: through the memory provider, not the engine.

`python -m soulgraph.eval provider FILE [--budget 1500] [--limit 8] [--users alone|together|crowd|all]`.
Every turn goes in through the memory service the provider's shim talks to
(`hermes/memory_service.py`), its clock set to the conversation's dates, through `sync_turn`
as the user's words (`Speaker: text`, one Hermes session per LoCoMo session); each session ends
with `consolidate`, as `on_session_end` does. Then every question is asked through `recall`,
the text `prefetch` would inject before the turn (at most `limit` memories within `budget`
characters), and scored on what was injected: a turn memory counts as its LoCoMo turn, a
memory consolidation promoted from a turn counts as that turn. Since a long memory may be shown
in part (memory/snippets.py), the text is checked too: the share of each written answer's words
that the block holds ("answer words").

Who shares a soul (`users`):

- `alone`: a fresh soul file per conversation (one user per soul).
- `together`: one soul for every conversation, each conversation its own user (scope
  `locomo:<sample_id>`, given to `sync_turn`, `consolidate` and `recall`), the sessions of all
  of them written in date order on one clock, the questions asked once everything is written.
  What a gateway serving many people through one agent does with scopes.
- `crowd`: the same one soul, with no scopes: every memory shared, as a gateway was before
  scopes. Another conversation's memory injected for a question takes a place and is no answer.

`compare` runs the three on the same questions. With `alone`, beside it in the same run, the
harness's direct figures for the same questions (the graph built from the turns by
`eval/locomo.py`, `recall` and `recall_related`, 20 deep): how much of what the graph can find
makes it into a 1,500-character prompt block.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from soulgraph.engine.index import words
from soulgraph.eval.locomo import _sessions, replay_locomo, scorable_questions, turn_text
from soulgraph.eval.ledger import LedgerProblems
from soulgraph.eval.scoring import Question, reciprocal_rank, recall_at
from soulgraph.hermes.memory_service import RECALL_BUDGET, RECALL_LIMIT, MemoryService
from soulgraph.memory import scopes
from soulgraph.store import SoulFile
from soulgraph.store.vectors import VectorStore, vectors_path

METHOD = "provider"
DIRECT = ["recall", "recall_related"]
USERS = ("alone", "together", "crowd")
PLATFORM = "locomo"
KS = (1, 5, 10)


class _Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def user_scope(sample_id: str) -> str:
    """The scope a conversation's memories are written and read in, in `together`."""
    return scopes.user_scope(PLATFORM, sample_id)


def replay(data: list[dict[str, Any]], budget: int = RECALL_BUDGET, limit: int = RECALL_LIMIT,
           users: str = "alone", direct: bool = True) -> dict[str, Any]:
    """One mode's run (`users`: alone, together or crowd); `direct`: add the harness's figures
    for the same questions (`recall`, `recall_related`)."""
    if users not in USERS:
        raise ValueError(f"unknown users mode {users!r} (known: {', '.join(USERS)}, all)")
    problems = LedgerProblems()
    stats: Counter = Counter()
    questions: list[Question] = []
    latencies: list[float] = []
    injected_chars: list[int] = []
    injected_items: list[int] = []
    answer_words: list[float] = []  # per question with a written answer: the share of its words in the block
    revisions: list[dict[str, Any]] = []
    memory_turns: dict[str, str] = {}  # memory id -> the LoCoMo turn it holds (ids are per soul)
    started = time.perf_counter()
    conversations = [(str(sample.get("sample_id", f"entry {position}")), sample) for position, sample in enumerate(data)
                     if isinstance(sample, dict) and isinstance(sample.get("conversation"), dict)]
    groups = [[c] for c in conversations] if users == "alone" else [conversations] if conversations else []
    for group in groups:
        clock = _Clock()
        with tempfile.TemporaryDirectory(prefix="soulgraph-locomo-") as folder:
            soul = SoulFile(Path(folder) / "soul.json", clock=clock)
            # The vectors built inline (not in the background), so every question sees them and
            # the figures do not depend on timing; without numpy, lexical as on such a host.
            service = MemoryService(soul, vectors=VectorStore(vectors_path(soul.path), background=False))
            scope_of = {where: user_scope(where) if users == "together" else scopes.SHARED for where, _ in group}
            turn_of: dict[str, str] = {}  # memory id -> LoCoMo dia_id
            owner: dict[str, str] = {}  # memory id -> the conversation it was written from
            turns: dict[str, set[str]] = {where: set() for where, _ in group}
            # Every session of the group in date order (a conversation's own order kept on a tie).
            sessions = sorted(
                ((start, order, number, where, session_turns)
                 for order, (where, sample) in enumerate(group)
                 for number, start, _date, session_turns in _sessions(sample["conversation"], problems, where)),
                key=lambda s: s[:3])
            for start, _order, number, where, session_turns in sessions:
                session_id = f"{where}-session-{number}"
                scope = scope_of[where]
                for offset, turn in enumerate(session_turns, 1):
                    dia_id = turn.get("dia_id") if isinstance(turn, dict) else None
                    if not isinstance(dia_id, str) or not dia_id or dia_id in turns[where]:
                        continue
                    # One clock for the soul: never backwards when sessions of two users overlap
                    # (one conversation alone never does: `_sessions` keeps them apart).
                    clock.now = max(clock.now + 1, start + offset)
                    written = service.sync_turn(user=turn_text(turn), session_id=session_id, platform=PLATFORM,
                                                scope=scope)
                    if written.get("id"):
                        turn_of[written["id"]] = dia_id
                        owner[written["id"]] = where
                        turns[where].add(dia_id)
                        stats["turns"] += 1
                clock.now += 1
                kept = service.consolidate(session_id=session_id, scope=scope)
                graph = service.soul.graph()
                for added in kept["added"]:
                    owner[added["id"]] = where
                    parent = next(iter(graph.parents.get(added["id"], ())), None)
                    if parent in turn_of:
                        turn_of[added["id"]] = turn_of[parent]
                stats["promoted"] += len(kept["added"])
                stats["sessions"] += 1
                for change in kept["updated"]:  # every change a later turn made, for a hand check
                    old, new = graph.nodes.get(change["id"]), graph.nodes.get(change["by"])
                    revisions.append({"conversation": where, "old_turn": turn_of.get(change["id"]),
                                      "new_turn": turn_of.get(change["by"]), "from": change["old"], "to": change["new"],
                                      "old_text": old.content if old else "", "new_text": new.content if new else ""})
            memory_turns.update(turn_of)
            stats["memories"] += len(service.soul.graph().nodes)
            stats["souls"] += 1
            # The vectors embedded before the first question, so its latency is a recall's alone.
            service.vectors.ready(service.soul.graph())
            for where, sample in group:
                for subject, category, text, evidence in scorable_questions(sample, turns[where], problems, where):
                    question = Question(category, subject, clock.now, {e: 0.0 for e in evidence})
                    t0 = time.perf_counter()
                    answer = service.recall(query=text, budget=budget, limit=limit, scope=scope_of[where])
                    latencies.append(time.perf_counter() - t0)
                    injected_chars.append(len(answer["text"]))
                    injected_items.append(len(answer["ids"]))
                    asked = written_answer(sample, subject)
                    if asked:
                        answer_words.append(len(asked & words(answer["text"])) / len(asked))
                    ranked = []
                    for i in answer["ids"]:
                        if owner.get(i, where) != where:  # another user's memory: a place taken, no answer
                            ranked.append(f"elsewhere:{i}")
                            stats["injected from another conversation"] += 1
                        elif i in turn_of:
                            ranked.append(turn_of[i])
                    question.record(METHOD, list(dict.fromkeys(ranked)))
                    questions.append(question)
                stats["conversations"] += 1
    seconds = time.perf_counter() - started
    if direct:
        by_subject = {q.subject: q for q in replay_locomo(data, DIRECT).questions}
        for question in questions:
            other = by_subject.get(question.subject)
            if other is not None:
                question.ranks.update(other.ranks)
    return {"questions": questions, "stats": stats, "seconds": seconds, "latencies": latencies,
            "injected_chars": injected_chars, "injected_items": injected_items, "answer_words": answer_words,
            "budget": budget, "limit": limit,
            "users": users, "direct": direct, "revisions": revisions, "memory_turns": memory_turns}


def written_answer(sample: dict[str, Any], subject: str) -> set[str]:
    """The searchable words of the answer LoCoMo writes for a question ("<where> q<number>");
    empty for one without (the adversarial questions give none)."""
    try:
        qa = sample["qa"][int(subject.rsplit(" q", 1)[1])]
    except (KeyError, IndexError, ValueError, TypeError):
        return set()
    answer = qa.get("answer") if isinstance(qa, dict) else None
    return words(str(answer)) if isinstance(answer, (str, int, float)) else set()


def compare(data: list[dict[str, Any]], budget: int = RECALL_BUDGET, limit: int = RECALL_LIMIT) -> dict[str, Any]:
    """The three modes on the same questions (`--users all`)."""
    started = time.perf_counter()
    runs = {users: replay(data, budget, limit, users=users, direct=False) for users in USERS}
    return {"runs": runs, "seconds": time.perf_counter() - started, "budget": budget, "limit": limit}


def scores(questions: list[Question]) -> dict[str, float]:
    """R@1, R@5, R@10 and MRR of what was injected, averaged over `questions`."""
    n = len(questions) or 1
    out = {f"R@{k}": sum(recall_at(q, METHOD, k) for q in questions) / n for k in KS}
    out["MRR"] = sum(reciprocal_rank(q, METHOD) for q in questions) / n
    return out


DESCRIBE = {"alone": "one soul per conversation", "together": "one soul, a scope per conversation",
            "crowd": "one soul, no scopes"}


def compare_text(source: str, result: dict[str, Any]) -> str:
    runs = result["runs"]
    base = scores(runs["alone"]["questions"])
    first = runs["alone"]
    lines = [f"LoCoMo {source} through the memory provider, each conversation a user: "
             f"{first['stats']['conversations']} conversations, {len(first['questions']):,} questions per mode; "
             f"at most {result['limit']} memories within {result['budget']:,} characters injected; {result['seconds']:.1f} s",
             ""]
    header = ("users", "souls", "memories", "questions", *[f"R@{k}" for k in KS], "MRR",
              *[f"Δ R@{k}" for k in KS], "Δ MRR", "injected", "others'", "p50 ms", "p99 ms", "s")
    rows = []
    for users, run in runs.items():
        got = scores(run["questions"])
        stats = run["stats"]
        rows.append((users, f"{stats['souls']}", f"{stats['memories']:,}", f"{len(run['questions']):,}",
                     *[f"{got[f'R@{k}']:.3f}" for k in KS], f"{got['MRR']:.3f}",
                     *[f"{got[name] - base[name]:+.3f}" for name in (*[f"R@{k}" for k in KS], "MRR")],
                     f"{_mean(run['injected_items']):.1f}",
                     f"{stats['injected from another conversation']:,}",
                     f"{_pct(run['latencies'], 0.5) * 1e3:.2f}", f"{_pct(run['latencies'], 0.99) * 1e3:.2f}",
                     f"{run['seconds']:.1f}"))
    lines += _table(header, rows)
    lines.append("")
    kinds = sorted({q.kind for q in first["questions"]})
    header = ("R@10 by category", "questions", *runs)
    rows = []
    for kind in kinds:
        per = {users: [q for q in run["questions"] if q.kind == kind] for users, run in runs.items()}
        rows.append((kind, f"{len(per['alone']):,}", *[f"{scores(group)['R@10']:.3f}" for group in per.values()]))
    lines += _table(header, rows)
    lines.append("")
    lines.append("; ".join(f"{users}: {DESCRIBE[users]}" for users in runs) + ". Δ: the difference to alone. "
                 "others': memories of another conversation injected, in all.")
    return "\n".join(lines)


def text(source: str, result: dict[str, Any]) -> str:
    questions: list[Question] = result["questions"]
    stats = result["stats"]
    users = result.get("users", "alone")
    who = "" if users == "alone" else f" ({DESCRIBE[users]})"
    lines = [f"LoCoMo {source} through the memory provider{who}: {stats['conversations']} conversations, "
             f"{stats['sessions']} sessions, {stats['turns']:,} turns through sync_turn, {stats['promoted']:,} "
             f"memories promoted by consolidation, {len(result['revisions']):,} marked as changed by a later turn, "
             f"{len(questions):,} questions; {result['seconds']:.1f} s",
             f"Injected per question (budget {result['budget']:,} characters, at most {result['limit']} memories): "
             f"{_mean(result['injected_items']):.1f} memories, {_mean(result['injected_chars']):,.0f} characters on average; "
             f"recall p50 {_pct(result['latencies'], 0.5) * 1e3:.2f} ms, p99 {_pct(result['latencies'], 0.99) * 1e3:.2f} ms",
             f"Answer words in the block: {_mean(result['answer_words']):.3f} of each written answer's words "
             f"({len(result['answer_words']):,} questions with one)",
             ""]
    if stats["injected from another conversation"]:
        lines.insert(2, f"Memories of another conversation injected: {stats['injected from another conversation']:,}")
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
    lines += _table(header, rows)
    return "\n".join(lines)


def _table(header: tuple, rows: list[tuple]) -> list[str]:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(h).ljust(w) if i == 0 else str(h).rjust(w) for i, (h, w) in enumerate(zip(header, widths))),
             "  ".join("-" * w for w in widths)]
    for row in rows:
        lines.append("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
    return lines


def _avg(group: list[Question], score) -> str:
    return f"{sum(score(q) for q in group) / len(group):.2f}" if group else "-"


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered))) - 1))]


def revisions_text(result: dict[str, Any]) -> str:
    """Every change the replay marked: the old memory's value, the new one, both texts."""
    lines = [f"{len(result['revisions'])} marked as changed by a later turn:"]
    for n, change in enumerate(result["revisions"], 1):
        lines.append(f"{n}. {change['conversation']} {change['old_turn']} -> {change['new_turn']}: "
                     f"{change['from']} -> {change['to']}")
        lines.append(f"   old: {' '.join(change['old_text'].split())[:300]}")
        lines.append(f"   new: {' '.join(change['new_text'].split())[:300]}")
    return "\n".join(lines)
