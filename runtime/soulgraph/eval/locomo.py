"""LoCoMo: turn-level evidence recall on long conversations.

Each conversation gets its own graph. Each session becomes a node at the session's
date ("1:56 pm on 8 May, 2023", read as UTC); each dialogue turn a node
``"speaker: text"`` (plus ``[image: caption]`` when the turn shared a picture), a child
of its session, stamped one second after the turn before it so the order is kept.
After the whole conversation every question is asked of every method, with the clock
at the last turn. A method's ranking is scored on turns only: session nodes are
structure, not evidence, so they are skipped (each method is asked for enough extra
ids to cover every session node it could return).

Session level, beside it: published retrieval-only LoCoMo figures mostly score sessions or
chunks, not turns. A method's sessions are ranked by their best turn in its top turns (the order
in which they first appear there); a question counts at k when a session holding any of its
evidence is among the first k (hit@k), and its MRR is 1 / the rank of the first such session.

Evidence ids are untidy: several ids in one string (``"D8:6; D9:17"``), a stray
colon (``"D:11:26"``), ids that name no turn. They are split, repaired or dropped,
and each case is counted; a question left without evidence is skipped and counted.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from soulgraph.eval.ledger import LedgerProblems
from soulgraph.eval.retrievers import make_retrievers
from soulgraph.eval.scoring import Question
from soulgraph.engine.graph import SoulGraph

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
KS = (1, 5, 10, 20)
SESSION_KS = (1, 3, 5, 10)
_SESSION = re.compile(r"^session_(\d+)$")
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")
_DIA_ID = re.compile(r"^D:?(\d+):(\d+)$")


@dataclass
class LocomoResult:
    methods: list[str]
    questions: list[Question]
    latencies: dict[str, list[float]]
    session_questions: list[Question] = field(default_factory=list)  # the same, scored by session
    problems: LedgerProblems = field(default_factory=LedgerProblems)
    stats: Counter = field(default_factory=Counter)
    seconds: float = 0.0


def parse_session_date(text: Any) -> float | None:
    """'1:56 pm on 8 May, 2023' -> epoch seconds (UTC); None when unreadable."""
    if not isinstance(text, str):
        return None
    cleaned = " ".join(text.replace(",", " , ").split()).replace(" ,", ",")
    for form in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y"):
        try:
            return datetime.strptime(cleaned, form).replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            continue
    return None


def turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn.get('speaker', '?')}: {turn.get('text', '')}".strip()
    caption = turn.get("blip_caption")
    if isinstance(caption, str) and caption.strip():
        text += f" [image: {caption.strip()}]"
    return text


def evidence_ids(raw: Any, turns: set[str], problems: LedgerProblems, where: str) -> list[str]:
    """The turn ids a question's evidence names, after splitting and repairing."""
    if not isinstance(raw, list):
        raw = [raw] if raw is not None else []
    found: list[str] = []
    for entry in raw:
        if not isinstance(entry, str):
            problems.note("evidence entry not a string (dropped)", f"{where}: {entry!r}")
            continue
        parts = [p for p in _EVIDENCE_SPLIT.split(entry.strip()) if p]
        if len(parts) > 1:
            problems.note("several ids in one evidence string (split)", f"{where}: {entry!r}")
        for part in parts:
            match = _DIA_ID.match(part)
            dia_id = f"D{match.group(1)}:{match.group(2)}" if match else part
            if dia_id != part:
                problems.note("malformed evidence id (repaired)", f"{where}: {part!r} -> {dia_id}")
            if dia_id not in turns:
                problems.note("evidence id naming no turn (dropped)", f"{where}: {part!r}")
            elif dia_id not in found:
                found.append(dia_id)
    return found


def read_locomo(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise ValueError("a LoCoMo file is a JSON list of conversations")
    return data


def _sessions(conversation: dict[str, Any], problems: LedgerProblems, where: str):
    """(number, start time, date text, turns) for each session, in session order."""
    numbered = []
    for key, turns in conversation.items():
        match = _SESSION.match(key)
        if match and isinstance(turns, list):
            numbered.append((int(match.group(1)), turns))
    numbered.sort(key=lambda pair: pair[0])
    sessions = []
    previous = 0.0
    for number, turns in numbered:
        date_text = conversation.get(f"session_{number}_date_time", "")
        start = parse_session_date(date_text)
        if start is None:
            problems.note("bad session date (a day after the previous session)", f"{where} session {number}: {date_text!r}")
            start = previous + 86400.0
        # Keep turns in order even if a session is dated before the previous one ends.
        start = max(start, previous)
        sessions.append((number, start, date_text, turns))
        previous = start + len(turns) + 1
    return sessions


def sessions_in_order(ranked_turns: list[str], session_of: dict[str, str]) -> list[str]:
    """The sessions of the ranked turns, each where its best turn stands."""
    return list(dict.fromkeys(session_of[turn] for turn in ranked_turns))


def scorable_questions(sample: dict[str, Any], turns: set[str], problems: LedgerProblems,
                       where: str) -> Iterator[tuple[str, str, str, list[str]]]:
    """Each question of a conversation that can be scored: (its subject, "<where> q<number>";
    its category; its text; its evidence, cleaned by `evidence_ids` against `turns`). A question
    without text or without usable evidence is skipped and noted in `problems`."""
    for number, qa in enumerate(sample.get("qa") or []):
        subject = f"{where} q{number}"
        if not isinstance(qa, dict) or not isinstance(qa.get("question"), str):
            problems.note("question without text (skipped)", subject)
            continue
        evidence = evidence_ids(qa.get("evidence"), turns, problems, subject)
        if not evidence:
            problems.note("question without usable evidence (skipped)", subject)
            continue
        yield subject, CATEGORIES.get(qa.get("category"), f"category {qa.get('category')}"), qa["question"], evidence


def replay_locomo(data: list[dict[str, Any]], methods: list[str], depth: int = max(KS)) -> LocomoResult:
    result = LocomoResult(methods, [], {m: [] for m in methods})
    problems, stats = result.problems, result.stats
    started = time.perf_counter()
    for position, sample in enumerate(data):
        if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
            problems.note("conversation without a 'conversation' object (skipped)", f"entry {position}")
            continue
        where = str(sample.get("sample_id", f"entry {position}"))
        now = 0.0
        graph = SoulGraph(clock=lambda: now)
        retrievers = make_retrievers(methods, graph)
        turns: set[str] = set()
        session_of: dict[str, str] = {}
        sessions = _sessions(sample["conversation"], problems, where)
        for number, start, date_text, session_turns in sessions:
            session_id = f"session_{number}"
            content = f"Session {number}, {date_text}" if date_text else f"Session {number}"
            graph.add(content, ["session"], node_id=session_id, created_at=start)
            for retriever in retrievers:
                retriever.observe_add(session_id, content, start)
            stats["sessions"] += 1
            for offset, turn in enumerate(session_turns, 1):
                dia_id = turn.get("dia_id") if isinstance(turn, dict) else None
                if not isinstance(dia_id, str) or not dia_id or dia_id in turns or dia_id in graph:
                    problems.note("turn without a usable dia_id (skipped)", f"{where} session {number}")
                    continue
                text = turn_text(turn)
                at = start + offset
                now = at
                graph.add(text, parents=[session_id], node_id=dia_id, created_at=at)
                for retriever in retrievers:
                    retriever.observe_add(dia_id, text, at)
                turns.add(dia_id)
                session_of[dia_id] = session_id
                stats["turns"] += 1
                stats["turns with an image caption"] += "[image: " in text

        # Enough extra depth that dropping every session node still leaves `depth` turns.
        ask_depth = depth + len(sessions)
        for subject, category, text, evidence in scorable_questions(sample, turns, problems, where):
            question = Question(category, subject, now, {e: 0.0 for e in evidence})
            by_session = Question(category, subject, now, {session_of[e]: 0.0 for e in evidence})
            for retriever in retrievers:
                t0 = time.perf_counter()
                ranked = retriever.ask(text, ask_depth)
                result.latencies[retriever.name].append(time.perf_counter() - t0)
                ranked_turns = [i for i in ranked if i in turns][:depth]
                question.record(retriever.name, ranked_turns)
                by_session.record(retriever.name, sessions_in_order(ranked_turns, session_of))
            result.questions.append(question)
            result.session_questions.append(by_session)
        stats["conversations"] += 1
    stats["questions"] = len(result.questions)
    result.seconds = time.perf_counter() - started
    return result
