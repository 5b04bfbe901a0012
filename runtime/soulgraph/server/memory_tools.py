"""The `memory` toolset: correct what the graph holds (`--toolsets graph,memory`).

    soul_update(node_id, action, by_id=None, reason="")   confirm | weaken | contradict | supersede | archive
    soul_merge(keep_id, merge_id)                          two memories that say the same become one
    soul_forget(node_id, reason, force=False)              gone for good; only an audit entry stays, and the
                                                           note's entry leaves the markdown files it was written to
    soul_history(node_id)                                  a node's audit entries, oldest first

Each write is one change of the store (durable before the answer, taken back on failure) and
one audit entry per node it touched (memory/lifecycle.py). Like every tool, these reach only
the memories of the server's scope (memory/scopes.py): another user's is an unknown id.
A flagged memory (memory/flagged.py) is answered withheld, as by every tool; in soul_history,
the reason of an entry about one is withheld too.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from soulgraph.engine import record
from soulgraph.memory import flagged, lifecycle, markdown_copies, markdown_files as files
from soulgraph.server import shapes
from soulgraph.server.answers import tool_registrar

from soulgraph.server.toolsets import MEMORY_TOOLS as TOOL_NAMES  # noqa: E402,F401

NodeId = Annotated[str, Field(min_length=1, max_length=200, description="A node id, as returned by another soul_* tool (e.g. 'n42').")]
Reason = Annotated[str, Field(max_length=1_000, description="Why, in a sentence; kept in the audit trail.")]
Action = Literal["confirm", "weaken", "contradict", "supersede", "archive"]

WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)
READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def register(server: MCPServer, tools: Any, folder: files.Folder | None = None) -> None:
    """Add the memory tools to `server`; `tools` is the graph toolset's SoulTools (store access,
    result shapes), `folder` where the markdown files a note was written to resolve (default:
    the soul file's folder, the Hermes home)."""
    folder = folder or files.Folder(tools.soul.path.parent)
    tool = tool_registrar(server)

    @tool(WRITE)
    async def soul_update(node_id: NodeId, action: Action, by_id: NodeId | None = None, reason: Reason = "") -> shapes.View:
        """Correct a memory. confirm: it held again (strength up); weaken: doubt it; archive:
        out of default recall, still searchable; contradict / supersede: `by_id` says
        otherwise / replaces it (the old one stays for history, out of default recall)."""
        writer = "tool:soul_update"
        if action in ("contradict", "supersede") and not by_id:
            raise ToolError(f"{action} needs by_id: the memory that {action}s it")
        if action not in ("contradict", "supersede") and by_id:
            raise ToolError(f"by_id goes with contradict or supersede, not {action}")

        def apply(graph):
            tools.own(graph, node_id)
            if by_id:
                tools.get(graph, by_id)
            if action == "confirm":
                return lifecycle.confirm(graph, node_id, writer=writer)
            if action == "weaken":
                return lifecycle.weaken(graph, node_id, writer=writer, reason=reason or None)
            if action == "archive":
                return lifecycle.archive(graph, node_id, writer=writer, reason=reason or None)
            if action == "contradict":
                return lifecycle.contradict(graph, node_id, by_id, writer=writer, reason=reason or None)
            return lifecycle.supersede(graph, node_id, by_id, writer=writer, reason=reason or None)

        node = tools.change(apply)
        return tools.view(node, status=node.status, strength=round(node.strength, 4),
                          **({"superseded_by": node.superseded_by} if node.superseded_by else {}))

    @tool(WRITE)
    async def soul_merge(keep_id: NodeId, merge_id: NodeId) -> shapes.View:
        """Two memories that say the same become one: `merge_id` goes into `keep_id`, which
        keeps both sources, all tags and every edge of both. Refused when one is built on the
        other."""
        def merge(graph):
            tools.own(graph, keep_id), tools.own(graph, merge_id)  # one scope: the server's
            rules = record.flagged(graph.get(merge_id).metadata)
            node = lifecycle.merge(graph, keep_id, merge_id, writer="tool:soul_merge")
            if rules:  # the merged text stays in merged_from: it stays withheld there
                sources = [{**entry, flagged.FLAGGED: list(rules)} if isinstance(entry, dict)
                           and entry.get("id") == merge_id else entry for entry in node.metadata["merged_from"]]
                node = graph.update(keep_id, metadata={**node.metadata, "merged_from": sources})
            return node

        node = tools.change(merge)
        return tools.view(node, merged=merge_id)

    @tool(DESTRUCTIVE)
    async def soul_forget(node_id: NodeId, reason: Annotated[str, Field(min_length=1, max_length=1_000, description="Why it must go; the only thing that stays.")],
                          force: bool = False) -> shapes.Forgotten:
        """Forget a memory for good: it leaves the graph and the files (the soul file is
        rewritten without it, and a note soul_remember or Hermes' memory tool wrote leaves
        MEMORY.md / USER.md too); only an audit entry with the id, the time and the reason
        stays. A pinned axiom needs force=true."""

        def apply(graph):
            written = markdown_copies.copies(tools.own(graph, node_id))
            lifecycle.forget(graph, node_id, reason, writer="tool:soul_forget", force=force)
            # Inside the change: a file that cannot be rewritten takes the forget back, so
            # the memory is never half gone.
            return markdown_copies.scrub_forgotten(folder, graph, written)

        try:
            scrubbed = tools.change(apply)
        except files.MarkdownFileError as exc:
            raise ToolError(f"{exc}; {node_id} was not forgotten (nothing changed)") from None
        answer: dict[str, Any] = {"forgotten": node_id, "reason": reason}
        if scrubbed.files:
            answer["scrubbed"] = scrubbed.files
        if scrubbed.inside_other_entries:
            answer["warnings"] = [f"{name} still holds the text inside another entry; edit that entry by hand"
                                  for name in scrubbed.inside_other_entries]
        return answer

    @tool(READ)
    async def soul_history(node_id: NodeId) -> shapes.History:
        """What happened to a memory: its audit entries (confirm, supersede, merge, forget, …),
        oldest first, with before/after digests. Works for forgotten ids too."""
        reader = tools.reader
        graph = tools.read()
        return {"node": node_id, "entries": [shown(graph, entry) for entry in lifecycle.history(graph, node_id)
                                             if entry.get("scope", "") in ("", reader.scope)]}

    def shown(graph, entry: dict[str, Any]) -> dict[str, Any]:
        """An audit entry as the answer shows it: the reason withheld when the entry, or the
        memory it is about, is flagged (a reason is writer text, and may quote the memory)."""
        if tools.show_flagged or "reason" not in entry:
            return entry
        about = graph.nodes.get(entry.get("node"))
        rules = record.flagged(entry) or (record.flagged(about.metadata) if about is not None else ())
        if not rules:
            return entry
        return {**entry, "reason": tools.marker(rules), "withheld": flagged.withheld(rules)}
