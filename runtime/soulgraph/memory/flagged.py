"""Flagged memories: text the write-time scanner found reading like prompt injection.

A memory is flagged when `record.flagged(node.metadata)` names the rules it matched (the write
path sets `metadata["flagged"]`). Such a memory is kept, so nothing the agent was told is lost,
but its text never reaches a prompt in the clear:

- prompts (the snapshot, `soul_prime`'s hot, focus and walk, the memory provider's prefetch
  and system-prompt block, a soul-repo export) leave it out entirely: `unflagged`, `where`,
  `excluded`;
- tool answers show it *withheld*: its id, kind, dates, pin and edges, and
  `{"reason": "reads like prompt injection", "rules": [...]}` in place of its text, tags,
  source and metadata (`withheld`, `marker`);
- only a person at the shell reads the text: `python -m soulgraph.memories flagged` lists
  them (`listing`), and `release PATH ID --reason TEXT` (`release`) lifts a false alarm.

A release keeps `metadata["released"] = {"rules": [...], "digest": <of the content>, "at": t}`
and an audit entry (action `release`, the operator's reason), logged before the node changes.
The write guard is to honour it (`released_by_operator`: the digest matches and the audit holds
the release): the same text is not flagged again, whatever rule fires on it later; an edit that
changes the text is scanned and flagged as any other write. A release the guard undoes as it is
saved is refused, nothing changed. A released memory stays unpinned: pinning it again is the
operator's next act, not the release's.
"""

from __future__ import annotations

import hashlib
import re
import weakref
from datetime import datetime, timezone
from typing import AbstractSet, Any, Callable, Iterable

from soulgraph.engine import record
from soulgraph.engine.graph import HiddenIds, Node, SoulGraph, SoulGraphError
from soulgraph.memory import lifecycle

FLAGGED = record.FLAGGED
RELEASED = "released"
REASON = "reads like prompt injection"
OPERATOR = "operator:soulgraph.memories"
COMMAND = "python -m soulgraph.memories flagged --soul-file"
_RULE = re.compile(r"[A-Za-z0-9_.:/+-]{1,64}")

Where = Callable[[Node], bool]


class FlaggedError(ValueError):
    """A refused operator act; the message names the problem and says nothing changed."""


# ---------------------------------------------------------------------------- what it is
def rules(node: Node) -> tuple[str, ...]:
    """The rules `node` was flagged for (empty: not flagged)."""
    return record.flagged(node.metadata)


def is_flagged(node: Node) -> bool:
    return bool(record.flagged(node.metadata))


def unflagged(node: Node) -> bool:
    """The predicate for reads that feed a prompt: True for a memory that may be shown."""
    return not record.flagged(node.metadata)


def where(base: Where | None) -> Where:
    """`base` (a reader's predicate, or None) and not flagged."""
    if base is None:
        return unflagged
    return lambda node: base(node) and not record.flagged(node.metadata)


def shown_rules(found: Iterable[Any]) -> list[str]:
    """Rule names as an answer may show them: the scanner's identifiers only (anything else
    in the field is writer text and is shown as "?")."""
    return [rule if isinstance(rule, str) and _RULE.fullmatch(rule) else "?" for rule in found]


def withheld(node_or_rules: Node | Iterable[Any]) -> dict[str, Any]:
    """The `withheld` field of a tool answer."""
    found = rules(node_or_rules) if isinstance(node_or_rules, Node) else tuple(node_or_rules)
    return {"reason": REASON, "rules": shown_rules(found)}


def marker(node_or_rules: Node | Iterable[Any], soul_path: Any = None) -> str:
    """The text a tool answer shows in place of a flagged memory's."""
    found = withheld(node_or_rules)["rules"]
    where_ = f" {soul_path}" if soul_path else " PATH"
    return (f"[withheld: {REASON} ({', '.join(found) or '?'}); an operator can read it with "
            f"`{COMMAND}{where_}`]")


# ---------------------------------------------------------------------------- which ones
class _Index:
    """The ids of a graph's flagged memories: one scan of every node's metadata when first
    asked (~16 ms at 100,000 memories), then kept up to date from the nodes the graph reports
    inserted, changed or taken out (`SoulGraph.field_watchers`), so that a search right after
    a write (a prefetch after a turn) does not scan every node again."""

    def __init__(self, graph: SoulGraph) -> None:
        self.ids: frozenset[str] = frozenset()
        self.changes = 0  # bumped whenever `ids` changes: what `excluded`'s answers are kept by
        self.changed: set[str] = set()  # ids the graph reported since `ids` was last brought up to date
        self.excluded: dict[int, tuple[AbstractSet[str], Any, HiddenIds]] = {}  # id(hidden) -> (hidden, key, both)
        graph.field_watchers.append(self.changed.add)
        self.scan(graph)

    def scan(self, graph: SoulGraph) -> None:
        self.changed.clear()
        found = frozenset(node.id for node in graph.nodes.values() if _is_flagged(node))
        if found != self.ids:
            self.ids, self.changes = found, self.changes + 1

    def follow(self, graph: SoulGraph) -> None:
        now = set(self.ids)
        for node_id in self.changed:
            node = graph.nodes.get(node_id)
            if node is not None and _is_flagged(node):
                now.add(node_id)
            else:
                now.discard(node_id)
        self.changed.clear()
        if now != self.ids:
            self.ids, self.changes = frozenset(now), self.changes + 1


def _is_flagged(node: Node) -> bool:
    return FLAGGED in node.metadata and bool(record.flagged(node.metadata))


_INDEXES: "weakref.WeakKeyDictionary[SoulGraph, _Index]" = weakref.WeakKeyDictionary()


def ids(graph: SoulGraph, version: Any = None) -> frozenset[str]:
    """The ids of the flagged memories in `graph` (hypotheses not included). `version`: None
    makes it scan every node again (for a caller that edits nodes' metadata in place, past the
    graph's methods); otherwise the ids follow the graph's own reports of what changed. An
    in-process edit of a node's metadata past the graph is caught by `unflagged` on every
    node shown: callers check both."""
    index = _INDEXES.get(graph)
    if index is None:
        index = _INDEXES[graph] = _Index(graph)
    elif version is None:
        index.scan(graph)
    elif index.changed:
        index.follow(graph)
    return index.ids


def excluded(graph: SoulGraph, hidden: AbstractSet[str] = frozenset(), version: Any = None) -> AbstractSet[str]:
    """What a search that feeds a prompt must never return: `hidden` (a reader's
    `hidden_ids`) and the flagged memories, as one set with the word index's mask, so the
    search stays the pruned one. `hidden` itself when nothing is flagged."""
    flagged_ids = ids(graph, version)
    if not flagged_ids:
        return hidden
    index = _INDEXES[graph]
    key = (index.changes, getattr(hidden, "version", None), len(hidden))
    slot = id(hidden) if hidden else 0  # every empty set is the same reader: one who is hidden nothing
    held = index.excluded.get(slot)
    if held is not None and (held[0] is hidden or not hidden) and held[1] == key:
        return held[2]
    both = HiddenIds(set(hidden) | flagged_ids)
    both.mask = (getattr(hidden, "mask", 0) or graph.index.mask_of(hidden)) | graph.index.mask_of(flagged_ids)
    both.version = (held[2].version + 1) if held is not None else 1
    if len(index.excluded) >= 64:  # one per reader scope asked for; a gateway's users come and go
        index.excluded.clear()
    # The reader's set is held with it, so its id cannot be another set's while the entry lives.
    index.excluded[slot] = (hidden, key, both)
    return both


MIN_LINE = 12  # characters: a shorter line of a flagged memory ("- ", "Note:") is no sign of it


def lines(graph: SoulGraph, version: Any = None) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Each line of a flagged memory's text (whitespace folded, at least MIN_LINE characters)
    -> (the memory's id, its rules): what a file for a prompt must not hold (the memories were
    seeded from, or mirrored to, the markdown files)."""
    found: dict[str, tuple[str, tuple[str, ...]]] = {}
    for node_id in sorted(ids(graph, version)):
        node = graph.nodes.get(node_id)
        if node is None:
            continue
        for line in node.content.splitlines():
            folded = " ".join(line.split()).lstrip("-*• ").strip()
            if len(folded) >= MIN_LINE:
                found.setdefault(folded, (node_id, rules(node)))
    return found


def holder(text: str, needles: dict[str, tuple[str, tuple[str, ...]]]) -> tuple[str, tuple[str, ...]] | None:
    """(id, rules) of a flagged memory whose line `text` holds, else None."""
    folded = " ".join(text.split())
    return next((held for needle, held in needles.items() if needle in folded), None)


def without_lines(text: str, needles: dict[str, tuple[str, tuple[str, ...]]]) -> tuple[str, list[int]]:
    """`text` without the lines that hold a flagged memory's line; and their numbers (from 1)."""
    if not needles or not text:
        return text, []
    kept, gone = [], []
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        if holder(line, needles) is None:
            kept.append(line)
        else:
            gone.append(number)
    return "".join(kept), gone


# ---------------------------------------------------------------------------- releases
def content_digest(text: str) -> str:
    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()[:16]


def is_released(metadata: dict[str, Any] | None, content: str, found: Iterable[str] = ()) -> bool:
    """For the write path: True when an operator released this very text (the digest of the
    content matches), so the scan that flags it again must not. The operator read the text
    and judged it, so a rule that fires on it later (detection improves) does not undo that;
    any edit of the text does. `found`, the rules the scan found, is not needed for that."""
    released = (metadata or {}).get(RELEASED)
    return isinstance(released, dict) and released.get("digest") == content_digest(content)


def released_by_operator(graph: SoulGraph, node: Node) -> bool:
    """`is_released` for a node of `graph`, and the release is the operator's: the audit trail
    holds a `release` entry for it (metadata alone could be written by anyone who writes
    metadata). What the write guard asks before it flags a node again."""
    if not is_released(node.metadata, node.content):
        return False
    return any(entry.get("action") == "release" and entry.get("node") == node.id for entry in reversed(graph.audit))


def listing(graph: SoulGraph) -> list[dict[str, Any]]:
    """Every flagged memory, oldest first, text included: for a person at the shell only."""
    found = [node for node in graph.nodes.values() if is_flagged(node)]
    found += [node for node in graph.branch.values() if is_flagged(node)]
    out = []
    for node in sorted(found, key=lambda n: (n.created_at, n.id)):
        out.append({"id": node.id, "scope": node.scope or "shared", "kind": node.kind, "rules": list(rules(node)),
                    "created": _iso(node.created_at), "pinned": node.pinned, "status": node.status,
                    "hypothesis": node.id in graph.branch, "source": node.source, "tags": list(node.tags),
                    "content": node.content})
    return out


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def text_listing(soul_path: str, found: list[dict[str, Any]]) -> str:
    """`listing` as the shell shows it: a header per memory, then its text, indented."""
    if not found:
        return f"{soul_path}: no flagged memories\n"
    lines = [f"{soul_path}: {len(found)} flagged memor{'y' if len(found) == 1 else 'ies'} "
             f"(withheld from every prompt: {REASON})", ""]
    for item in found:
        extra = "".join(f", {word}" for word, on in (("pinned", item["pinned"]), ("hypothesis", item["hypothesis"]),
                                                      (item["status"], item["status"] != record.DEFAULT_STATUS)) if on)
        lines.append(f"{item['id']}  scope {item['scope']}, {item['kind']}, created {item['created']}{extra}")
        lines.append(f"  rules: {', '.join(item['rules'])}")
        lines.append(f"  source: {item['source'] or '-'}")
        lines += [f"  | {line}" for line in item["content"].splitlines() or [""]]
        lines.append("")
    lines.append(f"Release a false alarm: python -m soulgraph.memories release --soul-file {soul_path} ID --reason TEXT")
    return "\n".join(lines) + "\n"


def release_in(soul: Any, node_id: str, reason: str, *, writer: str = OPERATOR) -> dict[str, Any]:
    """`release` in one change of the store `soul`; the report the CLI prints."""
    if not (reason or "").strip():
        raise FlaggedError("release needs a reason (it is kept in the audit trail); nothing changed")
    with soul.change() as graph:
        node = release(graph, node_id, reason, writer=writer)
        released = dict(node.metadata[RELEASED])
    return {"soul_file": str(soul.path), "released": node_id, "rules": released["rules"], "pinned": False,
            "reason": reason.strip()}


def release(graph: SoulGraph, node_id: str, reason: str, *, writer: str = OPERATOR) -> Node:
    """An operator's decision that a flagged memory is a false alarm (inside a store change):
    the flag is lifted and `released` kept for the write path, the memory stays unpinned, and
    the decision is an audit entry with `reason`. FlaggedError when it cannot be done."""
    reason = (reason or "").strip()
    if not reason:
        raise FlaggedError("release needs a reason (it is kept in the audit trail); nothing changed")
    try:
        node = graph.get(node_id)
    except SoulGraphError:
        if node_id in graph.branch:
            raise FlaggedError(f"{node_id} is a hypothesis; promote or discard it first; nothing changed") from None
        raise FlaggedError(f"unknown memory {node_id!r}; nothing changed") from None
    found = rules(node)
    if not found:
        raise FlaggedError(f"{node_id} is not flagged; nothing changed")
    before = graph.record(node_id)
    # The audit entry first: the write guard, rescanning the node as it changes, finds the
    # operator's release there (`released_by_operator`) and does not flag the text again.
    # (The rules stay in metadata.released: an audit entry's strings are scanned as writer text.)
    entry = {"at": graph.clock(), "action": "release", "node": node_id, "writer": writer, "reason": reason}
    if node.scope:
        entry["scope"] = node.scope
    entry["before"], entry["after"] = lifecycle.digest(before), None
    graph.log(entry)
    logged = graph.audit[-1]
    metadata = {k: v for k, v in node.metadata.items() if k != FLAGGED}
    metadata[RELEASED] = {"rules": sorted(found), "digest": content_digest(node.content), "at": graph.clock()}
    if node.pinned:
        graph.pin(node_id, False)
    values: dict[str, Any] = {"metadata": metadata}
    if node.privacy == "private":
        values["privacy"] = record.DEFAULT_PRIVACY  # the write path made it private for the flag alone
    graph.update(node_id, **values)
    logged["after"] = lifecycle.digest(graph.record(node_id))  # still inside the change: journaled as it ends
    if record.flagged(graph.get(node_id).metadata):  # the write guard flagged it again as it changed
        raise FlaggedError(f"{node_id}: the write guard flags this text again as it is saved (it does not "
                           "honour a release in this version); nothing changed")
    return node
