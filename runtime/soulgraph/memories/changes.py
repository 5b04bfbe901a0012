"""A person's corrections to what an agent remembers. Each is one change of the store, under
the writers' lock (servers and the gateway may keep running: they see it at their next read),
made through the one write path — a new text through memory/write.py, which the write guard
scans, and every other change through memory/lifecycle.py — with one audit entry per memory
it touched, naming `WRITER`. A change that cannot be made leaves everything as it was and
raises MemoriesError saying why.

    edit       a new version: a new memory with the corrected text (or kind, or tags)
               supersedes the old one, which stays for history, out of recall; an entry in
               MEMORY.md / USER.md the old text was written to gets the new text in its place
    supersede  another memory that already holds the right text replaces this one (it stays
               for history, out of recall; the newer one is linked as built on it)
    pin/unpin  an axiom (never fades, first in every prime) or an ordinary memory again
    archive    out of recall and prompts, kept and searchable (`unarchive` brings it back)
    forget     without `hard`: archived with the reason; with `hard`: gone from soul.json,
               the journal and every copy the store keeps, and from the markdown files; only
               an audit entry with the id, the time and the reason stays
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, TypeVar

from soulgraph.engine import record
from soulgraph.engine.graph import Node, SoulGraph, SoulGraphError
from soulgraph.memory import lifecycle, markdown_copies, markdown_files as files
from soulgraph.memory.guard import RefusedMemory
from soulgraph.memory.write import remember
from soulgraph.memories import shown
from soulgraph.memories.reading import get
from soulgraph.memories.target import MemoriesError, Target
from soulgraph.store import SoulFileError

WRITER = "operator:soulgraph.memories"
T = TypeVar("T")


def _change(target: Target, operation: Callable[[SoulGraph], T]) -> T:
    try:
        with target.soul.change() as graph:
            return operation(graph)
    except (SoulGraphError, SoulFileError, RefusedMemory, files.MarkdownFileError) as exc:
        raise MemoriesError(f"{exc}; nothing changed") from None
    except OSError as exc:
        raise MemoriesError(f"{exc.filename or target.soul.path}: {exc.strerror or exc}; nothing changed") from None


def _memory(graph: SoulGraph, node_id: str) -> Node:
    if node_id in graph.branch:
        raise SoulGraphError(f"{node_id} is a hypothesis, not a memory (the agent promotes or discards it)")
    return get(graph, node_id)


def edit(target: Target, node_id: str, *, content: str | None = None, kind: str | None = None,
         tags: Iterable[str] | None = None, reason: str = "") -> dict[str, Any]:
    """A new version of a memory: `content`, `kind` or `tags` changed, the rest kept (scope,
    source, pin, confidence, importance, what it was built on); the old one superseded by it."""
    if content is not None and not content.strip():
        raise MemoriesError("the new text is empty; nothing changed (to remove a memory, forget it)")

    def apply(graph: SoulGraph) -> dict[str, Any]:
        old = _memory(graph, node_id)
        if old.status == "superseded":
            raise SoulGraphError(f"{node_id} is superseded by {old.superseded_by}; edit that one")
        new_content = old.content if content is None else content.strip()
        new_tags = list(old.tags) if tags is None else list(tags)
        new_kind = old.kind if kind is None else kind
        if (new_content, new_tags, new_kind) == (old.content, list(old.tags), old.kind):
            raise SoulGraphError(f"{node_id}: the edit changes nothing")
        written_to = markdown_copies.copies(old) if new_content != old.content else []
        written = remember(graph, new_content, new_tags, writer=WRITER, parents=sorted(graph.parents.get(node_id, ())),
                           pinned=old.pinned, kind=new_kind, source=old.source, source_ref=old.source_ref,
                           confidence=old.confidence, importance=old.importance, where="edit", scope=old.scope)
        lifecycle.supersede(graph, node_id, written.node.id, writer=WRITER, reason=reason or "edited by hand")
        # Inside the change: a markdown file that cannot be rewritten takes the edit back.
        rewritten = markdown_copies.replace(target.folder, written_to, new_content) if written_to else None
        report = {"edited": node_id, "new": written.node.id, "memory": shown.brief(graph, written.node)}
        if rewritten and rewritten.files:
            report["markdown"] = rewritten.files
        if written.warnings:
            report["warnings"] = list(written.warnings)
        return report

    return {"soul_file": str(target.soul.path), **_change(target, apply)}


def supersede(target: Target, node_id: str, by_id: str, *, reason: str = "") -> dict[str, Any]:
    """`by_id` replaces `node_id` (both existing memories): the old one leaves recall, its
    validity ends now, and the two are linked."""
    def apply(graph: SoulGraph) -> dict[str, Any]:
        old, new = _memory(graph, node_id), _memory(graph, by_id)
        if new.status != "active":
            raise SoulGraphError(f"{by_id} is {new.status}; a memory is replaced by an active one")
        if record.flagged(new.metadata):
            raise SoulGraphError(f"{by_id} is flagged as prompt injection; a memory is not replaced by one")
        if old.scope and new.scope != old.scope:
            raise SoulGraphError(f"{by_id} is {new.scope or 'shared'} and {node_id} is {old.scope}'s: a memory is "
                                 "replaced within its own scope")
        lifecycle.supersede(graph, node_id, by_id, writer=WRITER, reason=reason or None)
        return {"id": node_id, "superseded_by": by_id, "status": "superseded"}

    return {"soul_file": str(target.soul.path), **_change(target, apply)}


def pin(target: Target, node_id: str, pinned: bool = True, *, reason: str = "") -> dict[str, Any]:
    def apply(graph: SoulGraph) -> dict[str, Any]:
        node = _memory(graph, node_id)
        if pinned and node.status != "active":
            raise SoulGraphError(f"{node_id} is {node.status}" + (f"; pin {node.superseded_by}, the memory that replaced it"
                                                                   if node.superseded_by else ""))
        was = node.pinned
        lifecycle.pin(graph, node_id, pinned, writer=WRITER, reason=reason or None)
        return {"id": node_id, "pinned": pinned, "changed": was != pinned}

    return {"soul_file": str(target.soul.path), **_change(target, apply)}


def archive(target: Target, node_id: str, *, reason: str = "") -> dict[str, Any]:
    def apply(graph: SoulGraph) -> dict[str, Any]:
        node = _memory(graph, node_id)
        if node.status != "active":
            raise SoulGraphError(f"{node_id} is {node.status} already, out of recall")
        lifecycle.archive(graph, node_id, writer=WRITER, reason=reason or None)
        return {"id": node_id, "status": "archived"}

    return {"soul_file": str(target.soul.path), **_change(target, apply)}


def unarchive(target: Target, node_id: str, *, reason: str = "") -> dict[str, Any]:
    def apply(graph: SoulGraph) -> dict[str, Any]:
        _memory(graph, node_id)
        lifecycle.unarchive(graph, node_id, writer=WRITER, reason=reason or None)
        return {"id": node_id, "status": "active"}

    return {"soul_file": str(target.soul.path), **_change(target, apply)}


def forget(target: Target, node_id: str, *, reason: str, hard: bool = False) -> dict[str, Any]:
    """Out of recall (archived, with `reason`), or with `hard` gone from every file."""
    if not (reason or "").strip():
        raise MemoriesError("forget needs a reason (it is kept in the audit trail); nothing changed")
    if not hard:
        done = archive(target, node_id, reason=reason)
        return {**done, "forgotten": node_id, "hard": False}

    def apply(graph: SoulGraph) -> dict[str, Any]:
        node = _memory(graph, node_id)
        written = markdown_copies.copies(node)
        lifecycle.forget(graph, node_id, reason.strip(), writer=WRITER, force=True)  # a person's own decision
        scrubbed = markdown_copies.scrub_forgotten(target.folder, graph, written)
        report: dict[str, Any] = {"forgotten": node_id, "hard": True, "reason": reason.strip()}
        if scrubbed.files:
            report["markdown"] = scrubbed.files
        if scrubbed.inside_other_entries:
            report["warnings"] = [f"{name} still holds the text inside another entry; edit that entry by hand"
                                  for name in scrubbed.inside_other_entries]
        return report

    return {"soul_file": str(target.soul.path), **_change(target, apply)}
