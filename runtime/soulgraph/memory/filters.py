"""Filters for recall: by kind, by status, by when a memory was written, by when what it says was true.

`where(...)` builds the predicate `SoulGraph.query(where=…)` applies. Times are seconds since
the epoch; `parse_time` reads the ISO 8601 dates and datetimes the tools take ("2026-03-01",
"2026-03-01T09:30:00+02:00"; no zone means UTC).

Validity: a memory holds from `valid_from` (else its `created_at`) until `valid_to` (exclusive;
none: still true). "What was true on D" (`valid_at`) is asked of every memory, superseded ones
included: that is what they are kept for.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Callable

from soulgraph.engine.graph import Node


def parse_time(text: str, name: str) -> float:
    """Seconds since the epoch from an ISO 8601 date or datetime; ValueError names `name`."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{name} must be an ISO 8601 date or datetime such as 2026-03-01, got {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def valid_at(node: Node, moment: float) -> bool:
    start = node.created_at if node.valid_from is None else node.valid_from
    return start <= moment and (node.valid_to is None or moment < node.valid_to)


def where(*, kinds: tuple[str, ...] = (), statuses: tuple[str, ...] = (), created_after: float | None = None,
          created_before: float | None = None, true_at: float | None = None) -> Callable[[Node], bool] | None:
    """The predicate for these filters, or None when there are none."""
    if not kinds and not statuses and created_after is None and created_before is None and true_at is None:
        return None

    def accept(node: Node) -> bool:
        return ((not kinds or node.kind in kinds)
                and (not statuses or node.status in statuses)
                and (created_after is None or node.created_at >= created_after)
                and (created_before is None or node.created_at < created_before)
                and (true_at is None or valid_at(node, true_at)))

    return accept
