"""Knowledge updates: after a conversation changed a fact, does recall give the current value?

`python -m soulgraph.eval updates FILE [--limit 10] [--records N]`, FILE a BEAM
knowledge-update set (`../shared/data/updates/updates-dev.jsonl`: read from there, never
copied into the project; CC BY-SA 4.0, its README gives the source and the record form).

Each record holds a conversation's user turns in order, a question, and which turns state the
old value (`stale_evidence`) and which the new one (`current_evidence`). The two questions of a
conversation share its history, so each history is replayed once, through the provider's own
write path: the memory service's `sync_turn` for every turn (its clock at the turn's date, one
Hermes session per BEAM date batch), `consolidate` at each session's end, as `on_session_end`
does. Then each question goes through `recall` (what prefetch injects), asked `limit` deep with
no character budget, and is scored on what came back: a turn memory counts as its turn, a memory
consolidation drew from a turn counts as that turn.

- current in top k: a current-evidence turn is among the `limit` shown;
- stale shown as current: a stale-evidence turn is shown and not marked as replaced (its memory
  is neither superseded nor contradicted, and its line does not say it was updated nor that a
  later memory says another value);
- current above stale: the best current turn stands above every stale one shown unmarked (a
  stale turn not shown, or shown marked, counts as below);
- current noted as older: a current turn is shown with a note that a later memory says another
  value (what a wrong note costs: the model is told its right answer may be out of date).

The labels are noisy (the set's README: 15-25 % of records point at a turn that does not state
the value), which caps every figure below 1; `--clean` scores only the records whose answer's
number appears in the current turn (`meta.answer_number_in_current` not False).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from soulgraph.engine import record as memory_record
from soulgraph.engine.graph import SoulGraph
from soulgraph.hermes import memory_service
from soulgraph.hermes.memory_service import MemoryService
from soulgraph.memory.guard import RefusedMemory
from soulgraph.store import SoulFile
from soulgraph.store.vectors import VectorStore, vectors_path

PLATFORM = "beam"
MARKED = ("superseded", "contradicted")
UPDATED_NOTE = "since updated"  # what a recall line says of a memory a later one replaced in part
LATER_NOTE = memory_service.LATER_NOTE  # ... and of one beside a newer value of what is asked


def read_updates(path: str | Path) -> list[dict[str, Any]]:
    """The records of a knowledge-update file (one JSON object a line); a clear error names a bad line."""
    records = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError as error:
                raise ValueError(f"{path}:{number}: not JSON ({error})") from None
            missing = [k for k in ("id", "history", "question", "current_evidence", "stale_evidence") if k not in item]
            if missing:
                raise ValueError(f"{path}:{number}: a record needs {', '.join(missing)}")
            records.append(item)
    return records


@dataclass
class Scored:
    id: str
    clean: bool
    current_shown: bool
    stale_unmarked: bool
    current_above: bool
    shown: list[int] = field(default_factory=list)  # history index of each memory shown (-1: none)
    current_marked: bool = False  # a current turn shown with a note that a later memory says otherwise
    notes: int = 0  # lines shown with that note


class _Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def _day(text: str) -> float:
    try:
        return datetime.strptime(text[:10], "%Y-%m-%d").replace(tzinfo=timezone.utc).timestamp()
    except (TypeError, ValueError):
        return 0.0


def conversations(records: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Records grouped by the history they share (BEAM tier and conversation)."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in records:
        meta = item.get("meta") or {}
        key = f"{meta.get('tier', '')}/{meta.get('conversation', '')}" if meta.get("conversation") is not None \
            else item["id"].rsplit("-", 1)[0]
        groups[key].append(item)
    return dict(groups)


def replay(records: list[dict[str, Any]], limit: int = 10, embed: bool = True) -> dict[str, Any]:
    started = time.perf_counter()
    stats: Counter = Counter()
    scored: list[Scored] = []
    revisions: list[dict[str, Any]] = []  # every change the replay marked, for a hand check
    for key, group in conversations(records).items():
        history = group[0]["history"]
        clock = _Clock()
        with tempfile.TemporaryDirectory(prefix="soulgraph-updates-") as folder:
            soul = SoulFile(Path(folder) / "soul.json", clock=clock)
            vectors = VectorStore(vectors_path(soul.path), background=False) if embed else None
            service = MemoryService(soul, embed=embed, vectors=vectors)
            turn_of = _write(service, clock, key, history, stats, revisions)
            graph = service.soul.graph()
            if vectors is not None:
                vectors.ready(graph)
            for item in group:
                answer = service.recall(query=item["question"], budget=1_000_000, limit=limit)
                scored.append(_score(item, answer, turn_of, graph))
        stats["conversations"] += 1
    return {"scored": scored, "stats": stats, "seconds": time.perf_counter() - started, "limit": limit,
            "revisions": revisions}


def _write(service: MemoryService, clock: _Clock, key: str, history: list[dict[str, Any]],
           stats: Counter, revisions: list[dict[str, Any]]) -> dict[str, int]:
    """Every turn through sync_turn, a session per date batch, consolidated at its end;
    returns memory id -> the history index it stands for."""
    turn_of: dict[str, int] = {}
    session, number, previous = "", 0, None

    def end_session() -> None:
        if not session:
            return
        kept = service.consolidate(session_id=session)
        graph = service.soul.graph()
        for added in kept["added"]:
            parent = next(iter(graph.parents.get(added["id"], ())), None)
            if parent in turn_of:
                turn_of[added["id"]] = turn_of[parent]
        stats["promoted"] += len(kept["added"])
        stats["revised"] += len(kept["updated"])
        for change in kept["updated"]:
            old, new = turn_of.get(change["id"], -1), turn_of.get(change["by"], -1)
            revisions.append({"old": old, "new": new, "from": change["old"], "to": change["new"], "conversation": key,
                              "old_text": history[old]["text"] if old >= 0 else "",
                              "new_text": history[new]["text"] if new >= 0 else ""})

    for index, turn in enumerate(history):
        date = str(turn.get("time", ""))
        if date != previous:
            end_session()
            number += 1
            session, previous = f"{key}-session-{number}", date
            stats["sessions"] += 1
        clock.now = max(clock.now + 1, _day(date) + index)
        try:
            written = service.sync_turn(user=str(turn.get("text", "")), session_id=session, platform=PLATFORM)
        except RefusedMemory:  # a secret the redaction could not cut out: Hermes is told, the turn is not kept
            stats["refused"] += 1
            continue
        if written.get("id"):
            turn_of[written["id"]] = index
            stats["turns"] += 1
    end_session()
    clock.now += 1
    return turn_of


def _marked(graph: SoulGraph, node_id: str, line: str) -> bool:
    node = graph.nodes.get(node_id)
    return (node is None or node.status in MARKED or UPDATED_NOTE in line or LATER_NOTE in line
            or memory_record.flagged(node.metadata))


def _score(item: dict[str, Any], answer: dict[str, Any], turn_of: dict[str, int], graph: SoulGraph) -> Scored:
    current, stale = set(item["current_evidence"]), set(item["stale_evidence"])
    lines = answer["text"].split("\n")
    shown: list[int] = []
    best_current = best_stale = None
    stale_unmarked = False
    current_marked, notes = False, 0
    for rank, node_id in enumerate(answer["ids"]):
        index = turn_of.get(node_id, -1)
        shown.append(index)
        line = lines[rank] if rank < len(lines) else ""
        if LATER_NOTE in line:
            notes += 1
            current_marked = current_marked or index in current
        if index in current and best_current is None:
            best_current = rank
        if index in stale and not _marked(graph, node_id, line):
            stale_unmarked = True
            if best_stale is None:
                best_stale = rank
    clean = (item.get("meta") or {}).get("answer_number_in_current") is not False
    above = best_current is not None and (best_stale is None or best_current < best_stale)
    return Scored(item["id"], clean, best_current is not None, stale_unmarked, above, shown, current_marked, notes)


def figures(scored: list[Scored]) -> dict[str, float]:
    n = len(scored) or 1
    return {"records": len(scored),
            "current_in_top": sum(s.current_shown for s in scored) / n,
            "stale_shown_as_current": sum(s.stale_unmarked for s in scored) / n,
            "current_above_stale": sum(s.current_above for s in scored) / n,
            "current_marked_older": sum(s.current_marked for s in scored) / n,
            "notes": sum(s.notes for s in scored)}


def text(source: str, result: dict[str, Any]) -> str:
    stats, limit = result["stats"], result["limit"]
    rows = [("all records", figures(result["scored"])),
            ("clean (answer's number in the current turn)", figures([s for s in result["scored"] if s.clean]))]
    lines = [f"Knowledge updates {source} through the memory provider: {stats['conversations']} conversations, "
             f"{stats['sessions']} sessions, {stats['turns']:,} turns through sync_turn, {stats['promoted']:,} memories "
             f"promoted by consolidation, {stats['revised']:,} marked as changed by a later turn; "
             f"{result['seconds']:.1f} s",
             "",
             f"| records | n | current in top {limit} | stale shown as current | current above stale "
             "| current noted as older |",
             "|---|---|---|---|---|---|"]
    for name, got in rows:
        lines.append(f"| {name} | {got['records']} | {got['current_in_top']:.3f} | {got['stale_shown_as_current']:.3f} "
                     f"| {got['current_above_stale']:.3f} | {got['current_marked_older']:.3f} |")
    lines.append("")
    lines.append(f"Lines shown with '{LATER_NOTE} …': {figures(result['scored'])['notes']}.")
    lines.append("Goal: current in top 10 ≥ 0.90, stale shown as current ≤ 0.25, current above stale ≥ 0.90.")
    return "\n".join(lines)


def to_json(source: str, result: dict[str, Any]) -> dict[str, Any]:
    return {"source": source, "stats": dict(result["stats"]), "seconds": result["seconds"], "limit": result["limit"],
            "all": figures(result["scored"]), "clean": figures([s for s in result["scored"] if s.clean]),
            "records": [s.__dict__ for s in result["scored"]], "revisions": result["revisions"]}
