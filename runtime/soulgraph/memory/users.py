"""The operator's acts on users' memories (memory/scopes.py): list them, share one, forget a user.

    users(soul)                       each user scope with how many memories it holds
    share(soul, ids, reason)          one user's memories become shared: every user then sees them
    forget_user(soul, scope, reason)  every memory of one user gone from every file (the right to
                                      be forgotten), with a report

Sharing is never automatic: nothing in the provider or the MCP server turns a user's memory
into a shared one; this is the only way, and its audit entry says who did it. `python -m
soulgraph.memories users|share|forget-user` is the command line over these.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from soulgraph.engine.graph import SoulGraphError
from soulgraph.memory import lifecycle, markdown_copies, markdown_files as files, scopes
from soulgraph.store import SoulFile

WRITER = "operator:soulgraph.memories"


class UsersError(ValueError):
    """A refused act; the message names the problem and says nothing was changed."""


def users(soul: SoulFile) -> dict[str, Any]:
    graph = soul.graph()
    held = scopes.users(graph)
    return {"soul_file": str(soul.path), "shared": len(graph.nodes) - sum(held.values()),
            "users": [{"scope": scope, "memories": count} for scope, count in held.items()]}


def share(soul: SoulFile, node_ids: Iterable[str], reason: str) -> dict[str, Any]:
    """Make these memories shared (each must be a user's); all or none."""
    node_ids = list(dict.fromkeys(node_ids))
    if not node_ids:
        raise UsersError("no memory named; nothing changed")
    if not reason.strip():
        raise UsersError("share needs a reason (it is kept in the audit trail); nothing changed")
    shared: list[dict[str, str]] = []
    try:
        with soul.change() as graph:
            for node_id in node_ids:
                was = graph.get(node_id).scope
                if not was:
                    raise UsersError(f"{node_id} is shared already; nothing changed")
                lifecycle.share(graph, node_id, writer=WRITER, reason=reason.strip())
                shared.append({"id": node_id, "was": was})
    except SoulGraphError as exc:
        raise UsersError(f"{exc}; nothing changed") from None
    return {"soul_file": str(soul.path), "shared": shared}


def forget_user(soul: SoulFile, scope: str, reason: str, folder: Path | None = None) -> dict[str, Any]:
    """Every memory of `scope` forgotten for good, in one change: out of soul.json and its
    journal (the store rewrites both, and deletes its own copies that held the text), and each
    entry a memory of theirs put in MEMORY.md / USER.md (Hermes' memory tool, mirrored) taken
    out of those files; the user's name replaced in the audit trail by a digest."""
    scope = scopes.parse(scope)
    if not scope:
        raise UsersError("forget-user needs a user's scope (platform:user), not the shared scope")
    if not reason.strip():
        raise UsersError("forget-user needs a reason (it is all that stays); nothing changed")
    markdown = files.Folder(folder or soul.path.parent)
    outcome: dict[str, Any] = {}

    def apply(graph) -> None:
        nodes = [graph.nodes[i] for i in graph.scopes.get(scope, ())]
        written = sorted({copy for node in nodes for copy in markdown_copies.copies(node)})
        outcome["ids"] = lifecycle.forget_user(graph, scope, reason.strip(), writer=WRITER)
        # Inside the change: a markdown file that cannot be rewritten takes the whole forget back.
        outcome["scrubbed"] = markdown_copies.scrub_forgotten(markdown, graph, written)

    warnings_before = len(soul.warnings)
    try:
        with soul.change() as graph:
            if scope not in graph.scopes and not any(n.scope == scope for n in graph.branch.values()):
                raise UsersError(f"no memory of {scope} in {soul.path}; nothing changed")
            apply(graph)
    except (SoulGraphError, files.MarkdownFileError) as exc:
        raise UsersError(f"{exc}; {scope} was not forgotten (nothing changed)") from None
    scrubbed = outcome["scrubbed"]
    report: dict[str, Any] = {"soul_file": str(soul.path), "scope": scope, "forgotten": len(outcome["ids"]),
                              "ids": outcome["ids"], "audit_name": lifecycle.forgotten_scope(scope),
                              "rewritten": [str(soul.path), str(soul.journal_path)],
                              "markdown_scrubbed": scrubbed.files,
                              "removed": soul.warnings[warnings_before:]}
    if scrubbed.inside_other_entries:
        report["warnings"] = [f"{name} still holds a text of theirs inside another entry; edit it by hand"
                              for name in scrubbed.inside_other_entries]
    return report
