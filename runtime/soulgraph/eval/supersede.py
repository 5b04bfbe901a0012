"""Does the current version win? The update/supersede evaluation, on real ledgers.

PEPs and KEPs mark replaced proposals (`meta.status` "Superseded" / "replaced") and the
proposal that replaced them names the old one in its deps (the `Replaces` / `replaces`
header). For each such pair (old, new: the earliest later task that depends on old) the
question is "what is current about <old's title>": the replacement should rank above the
replaced proposal. Every task is added in time order (title as content, deps as parents); the
same questions are asked twice (the answer sought is the version current now: a chain of
replacements is followed to its end):

- without the lifecycle: the graph as seed 000 kept it (everything in recall);
- with it: each old proposal superseded by its replacement (`memory/lifecycle.supersede`).

Reported: pairs, how often the replacement ranks above the replaced one, and how often the
replacement is in the top 5 / top 10.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from soulgraph.engine.graph import Hit, SoulGraph
from soulgraph.eval.ledger import read_ledger
from soulgraph.memory import lifecycle, ranking

REPLACED_STATUSES = {"superseded", "replaced"}


def supersede_pairs(path: str | Path) -> tuple[list[Any], list[tuple[str, str]]]:
    """The ledger's tasks (replay order) and its (old id, new id) replacement pairs."""
    ledger = read_ledger(path)
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    status = {str(entry.get("id")): str((entry.get("meta") or {}).get("status", "")).lower() for entry in raw}
    position = {task.id: i for i, task in enumerate(ledger.tasks)}
    pairs = []
    for old in ledger.tasks:
        if status.get(old.id) not in REPLACED_STATUSES:
            continue
        later = [task for task in ledger.tasks if old.id in task.deps and position[task.id] > position[old.id]]
        if later:
            pairs.append((old.id, later[0].id))
    return ledger.tasks, pairs


def _graph(tasks: list[Any]) -> SoulGraph:
    clock = _Clock()
    graph = SoulGraph(clock=clock)
    for task in tasks:
        clock.now = task.created_at
        graph.add(task.title, parents=[dep for dep in task.deps if dep in graph.nodes], node_id=task.id,
                  created_at=task.created_at)
    clock.now = max((task.created_at for task in tasks), default=0.0) + 86400
    return graph


class _Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def _current(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Each old id with the version that is current now: replacements are followed to the end
    of the chain (A replaced by B, B by C: C is what is current about A)."""
    replaced_by = dict(pairs)
    result = []
    for old, new in pairs:
        seen = {old}
        while new in replaced_by and new not in seen:
            seen.add(new)
            new = replaced_by[new]
        result.append((old, new))
    return result


def _score(graph: SoulGraph, tasks_by_id: dict[str, Any], pairs: list[tuple[str, str]],
           search: Callable[[SoulGraph, str], list[Hit]]) -> dict[str, float]:
    above = top5 = top10 = 0
    for old, new in _current(pairs):
        ranked = [hit.node.id for hit in search(graph, tasks_by_id[old].title)]
        rank_new = ranked.index(new) if new in ranked else None
        rank_old = ranked.index(old) if old in ranked else None
        if rank_new is not None and (rank_old is None or rank_new < rank_old):
            above += 1
        top5 += rank_new is not None and rank_new < 5
        top10 += rank_new is not None
    n = max(1, len(pairs))
    return {"new_above_old": round(above / n, 3), "new_in_top5": round(top5 / n, 3), "new_in_top10": round(top10 / n, 3)}


def evaluate(path: str | Path) -> dict[str, Any]:
    tasks, pairs = supersede_pairs(path)
    by_id = {task.id: task for task in tasks}
    graph = _graph(tasks)
    before = _score(graph, by_id, pairs, _engine_search)
    graph.begin()
    for old, new in pairs:
        if graph.nodes[old].status == "active":
            lifecycle.supersede(graph, old, new, writer="eval")
    graph.end()
    after = _score(graph, by_id, pairs, _engine_search)
    recalled = _score(graph, by_id, pairs, _recall)
    return {"ledger": str(path), "tasks": len(tasks), "pairs": len(pairs), "without_lifecycle": before,
            "with_lifecycle": after, "with_lifecycle_recall": recalled}


def _engine_search(graph: SoulGraph, text: str) -> list[Hit]:
    return graph.query(text, 10)


def _recall(graph: SoulGraph, text: str) -> list[Hit]:
    """soul_query's ranking: a strong match on a replaced proposal brings its replacement."""
    return ranking.recall(graph, text, 10)


def text(report: dict[str, Any]) -> str:
    lines = [f"{report['ledger']}: {report['tasks']} tasks, {report['pairs']} replacement pairs",
             f"{'':<22} {'new above old':>13} {'new in top 5':>12} {'new in top 10':>13}"]
    for label, key in (("without lifecycle", "without_lifecycle"), ("with lifecycle", "with_lifecycle"),
                       ("with lifecycle, recall", "with_lifecycle_recall")):
        row = report[key]
        lines.append(f"{label:<22} {row['new_above_old']:>13.3f} {row['new_in_top5']:>12.3f} {row['new_in_top10']:>13.3f}")
    return "\n".join(lines)
