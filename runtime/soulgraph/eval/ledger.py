"""Loading and checking a task ledger.

A ledger is a JSON list of ``{"id", "title", "created_at", "updated_at": [...],
"deps": [ids], "project"?, "meta"?}`` with ISO 8601 UTC times. Real ledgers are untidy,
so nothing in one task stops the replay: a problem is counted in `LedgerProblems`,
the offending piece is dropped, and the report says how many of each were seen.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


@dataclass(slots=True)
class Task:
    id: str
    title: str
    created_at: float
    updated_at: list[float]
    deps: list[str]  # only ids of tasks in the ledger, without repeats or the task itself
    project: str | None = None
    # dep id -> when the dependency was first declared, for deps whose ledger says so.
    dep_declared_at: dict[str, float] = field(default_factory=dict)
    order: int = 0  # position in the ledger file: the tie-break between equal times


@dataclass
class LedgerProblems:
    """What was wrong with a ledger, counted by kind, with a few examples of each."""

    counts: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def note(self, kind: str, example: str) -> None:
        self.counts[kind] += 1
        shown = self.examples.setdefault(kind, [])
        if len(shown) < 3:
            shown.append(example)

    def to_dict(self) -> dict[str, Any]:
        return {"counts": dict(sorted(self.counts.items())), "examples": dict(sorted(self.examples.items()))}


@dataclass
class Ledger:
    tasks: list[Task]  # in replay order: by created_at, then by position in the file
    problems: LedgerProblems
    source: str = ""
    entries: int = 0  # entries in the file, before anything was skipped


def parse_time(value: Any) -> float | None:
    """ISO 8601 (naive means UTC) or epoch seconds -> epoch seconds; None if unreadable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if value == value and abs(value) < 1e11 else None
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def read_ledger(path: str | Path, project: str | None = None) -> Ledger:
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    ledger = check_ledger(data, project=project)
    ledger.source = str(path)
    return ledger


def _project_of(raw: dict[str, Any]) -> str | None:
    meta = raw.get("meta") if isinstance(raw.get("meta"), dict) else {}
    value = raw.get("project", meta.get("project"))
    return str(value) if value not in (None, "") else None


def check_ledger(data: Any, project: str | None = None) -> Ledger:
    """Validate raw ledger data. Only a file that is not a list of tasks is fatal."""
    if not isinstance(data, list):
        raise ValueError("a ledger is a JSON list of tasks")
    problems = LedgerProblems()
    tasks: dict[str, Task] = {}
    raw_deps: dict[str, list[Any]] = {}
    raw_declared: dict[str, Any] = {}
    for position, raw in enumerate(data):
        if not isinstance(raw, dict) or raw.get("id") in (None, ""):
            problems.note("task without an id", f"entry {position}")
            continue
        task_id = str(raw["id"])
        if task_id in tasks:
            problems.note("duplicate id (later copy skipped)", task_id)
            continue
        title = raw.get("title")
        if not isinstance(title, str) or not title.strip():
            problems.note("task without a title (skipped)", task_id)
            continue
        created = parse_time(raw.get("created_at"))
        if created is None:
            problems.note("bad created_at (task skipped)", f"{task_id}: {raw.get('created_at')!r}")
            continue
        task_project = _project_of(raw)
        if project is not None and task_project != project:
            continue
        updates = []
        raw_updates = raw.get("updated_at") or []
        if not isinstance(raw_updates, list):
            raw_updates = [raw_updates]
        for value in raw_updates:
            moment = parse_time(value)
            if moment is None:
                problems.note("bad updated_at (dropped)", f"{task_id}: {value!r}")
            elif moment < created:
                problems.note("updated_at before created_at (dropped)", f"{task_id}: {value!r}")
            else:
                updates.append(moment)
        tasks[task_id] = Task(task_id, title.strip(), created, sorted(updates), [], task_project, order=position)
        deps = raw.get("deps") or []
        raw_deps[task_id] = deps if isinstance(deps, list) else [deps]
        meta = raw.get("meta") if isinstance(raw.get("meta"), dict) else {}
        raw_declared[task_id] = meta.get("dep_declared_at") or {}

    # Dependencies are checked once every id is known: a dep may name a later task.
    all_ids = {str(raw.get("id")) for raw in data if isinstance(raw, dict) and raw.get("id") not in (None, "")}
    for task_id, task in tasks.items():
        for dep in raw_deps[task_id]:
            dep = str(dep)
            if dep == task_id:
                problems.note("task depends on itself (dropped)", task_id)
            elif dep in tasks:
                if dep not in task.deps:
                    task.deps.append(dep)
            elif project is not None and dep in all_ids:
                problems.note("dep outside the chosen project (dropped)", f"{task_id} -> {dep}")
            else:
                problems.note("unknown dep id (dropped)", f"{task_id} -> {dep}")
        declared = raw_declared[task_id]
        if not isinstance(declared, dict):
            problems.note("bad meta.dep_declared_at (ignored)", task_id)
            continue
        for dep, value in declared.items():
            if str(dep) not in task.deps:
                continue
            moment = parse_time(value)
            if moment is None:
                problems.note("bad dep_declared_at time (ignored)", f"{task_id} -> {dep}: {value!r}")
            else:
                task.dep_declared_at[str(dep)] = moment

    ordered = sorted(tasks.values(), key=lambda t: (t.created_at, t.order))
    return Ledger(ordered, problems, entries=len(data))
