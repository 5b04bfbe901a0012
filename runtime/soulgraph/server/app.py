"""The soul graph MCP server: `python -m soulgraph.mcp [--soul-file PATH]`.

It speaks MCP over stdio and exposes exactly the 13 tools below. Reads never write;
every tool that changes the graph saves soul.json before it answers. A refused call
(unknown id, a cycle, empty content, bad arguments) comes back as an MCP tool error
that says why, and changes nothing.

A server serves one scope (`--scope`, memory/scopes.py): the shared memories and, when
started with `--scope platform:user`, that user's. An MCP tool call does not say who asks
(Hermes sends none), so the default is the shared scope alone: on a gateway home, every
tool reads and writes only what every user of the agent may see, and another user's memory
is an unknown id to every tool.

A memory the write-time scanner flagged as reading like prompt injection (memory/flagged.py)
never reaches a prompt in the clear: `soul_prime`, the `soul://snapshot` resource and the
`soul_session_start` prompt leave it out entirely, and every other answer shows it withheld
(its id, kind, dates, pin, edges and the rules it matched, never its text, tags, source or
metadata). `--show-flagged` shows the text in tool answers, for an operator's own session;
prime and the snapshot leave flagged memories out even then.

The tools are `async` on purpose: each one is far cheaper than the transport, and
running them on the event loop (instead of the SDK's thread pool) keeps calls in order
with no locking.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Callable, Literal, TypeVar

import anyio
from pydantic import Field

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from soulgraph import __version__
from soulgraph.engine import record
from soulgraph.engine.graph import Hit, Node, SoulGraph, SoulGraphError
from soulgraph.memory import entities, filters, flagged, lifecycle, ranking, scopes, snapshot
from soulgraph.memory.write import explore as explore_memory, remember
from soulgraph.memory import markdown_files as files
from soulgraph.server import markdown_tools, memory_tools, shapes, stdio
from soulgraph.server.answers import tool_calls, tool_registrar
from soulgraph.server.toolsets import DEFAULT_TOOLSETS, GRAPH_TOOLS, TOOLSETS, parse_toolsets, problem, tool_names  # noqa: F401
from soulgraph.store import SoulFile, SoulFileError, default_soul_file
from soulgraph.store.vectors import VectorStore, vectors_path

TOOL_NAMES = GRAPH_TOOLS  # the default server's tools

# Bounds on what one call may ask for: an agent's memory entry is a paragraph, not a book.
Content = Annotated[str, Field(min_length=1, max_length=10_000, description="The memory, decision or belief, in plain text.")]
QueryText = Annotated[str, Field(max_length=2_000, description="What to look for, in plain words (the words matter, not their order).")]
Hint = Annotated[str, Field(max_length=2_000, description="More words, merged into the search with less weight: what else the task is about.")]
Context = Annotated[str, Field(max_length=2_000, description="What this session is about (the user's request): the best matching memory and its lineage come back as focus.")]
NodeId = Annotated[str, Field(min_length=1, max_length=200, description="A node id, as returned by another soul_* tool (e.g. 'n42').")]
Tag = Annotated[str, Field(min_length=1, max_length=100, description="One tag, e.g. 'lesson' or 'project:apollo'.")]
Pinned = Annotated[bool, Field(description="true: an axiom, never fades, always listed first; false: an ordinary memory.")]
Tags = Annotated[list[Tag], Field(max_length=32, description="Tags such as 'lesson', 'axiom' or 'project:<name>'.")]
Parents = Annotated[list[NodeId], Field(max_length=32, description="Ids of existing nodes this one was built on.")]
Limit = Annotated[int, Field(ge=1, le=100, description="How many nodes to return at most.")]
Depth = Annotated[int, Field(ge=1, le=6, description="How many edges to follow.")]
Kind = Annotated[Literal[record.KINDS], Field(description="What sort of memory it is (default: note; axiom when pinned).")]
Status = Annotated[Literal[record.STATUSES], Field(description="Only memories of this status (superseded, contradicted and archived ones included).")]
Source = Annotated[str, Field(max_length=500, description="Where it came from, e.g. 'user said', a URL, a file (default: this tool).")]
Share = Annotated[float, Field(ge=0.0, le=1.0)]

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
IDEMPOTENT_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


T = TypeVar("T")


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


class SoulTools:
    """The graph operations behind the tools, with results shaped for an agent."""

    def __init__(self, soul: SoulFile, embed: bool = True, reader: scopes.Reader = scopes.SHARED_READER,
                 show_flagged: bool = False):
        self.soul = soul
        self.reader = reader  # whose memories the tools see and write (the shared ones, and a user's)
        # An operator's own session (--show-flagged): flagged memories' text in tool answers.
        self.show_flagged = show_flagged
        # Vectors beside the word index (store/vectors.py): used for questions once ready;
        # without the `embed` extra, or while they load, search is lexical and says so.
        self.vectors = VectorStore(vectors_path(soul.path), enabled=embed)

    def brief(self, node: Node, **extra: Any) -> dict[str, Any]:
        """A node in a list of results: what an agent reads to decide, and no more. Every
        byte is serialised twice and crosses the pipe, so lists leave out the bookkeeping
        (counts, access times, children, metadata) that soul_add and friends return."""
        rules = record.flagged(node.metadata)
        withheld = rules and not self.show_flagged
        brief = {
            "id": node.id,
            "content": self.marker(rules) if withheld else node.content,
            "tags": [] if withheld else node.tags,
            "created_at": _iso(node.created_at),
            "parents": self.seen(self.soul.loaded.parents.get(node.id, ())),
            "pinned": node.pinned,
        }
        if rules:
            brief["kind"] = node.kind
            brief["withheld" if withheld else "flagged"] = flagged.withheld(rules)
        changes = node.metadata.get(lifecycle.UPDATED) if not withheld else None
        if changes:  # a later memory changed a value this one holds (memory/updates.py): say which
            visible = set(self.seen(c.get("by") for c in changes if isinstance(c, dict)))
            updated = [{"old": str(c["old"]), "new": str(c["new"]), "by": c["by"]} for c in changes[-3:]
                       if isinstance(c, dict) and c.get("by") in visible]
            if updated:
                brief["updated"] = updated
        brief.update(extra)
        return brief

    def marker(self, rules: tuple[str, ...]) -> str:
        """What an answer shows in place of a flagged memory's text."""
        return flagged.marker(rules, self.soul.path)

    def hypothesis(self, node: Node, parents: Any) -> dict[str, Any]:
        """A hypothesis of the exploration branch in an answer (withheld when flagged)."""
        rules = record.flagged(node.metadata)
        if rules and not self.show_flagged:
            return {"id": node.id, "content": self.marker(rules), "tags": [], "parents": sorted(parents),
                    "withheld": flagged.withheld(rules)}
        held = {"id": node.id, "content": node.content, "tags": node.tags, "parents": sorted(parents)}
        if rules:
            held["flagged"] = flagged.withheld(rules)
        return held

    def metadata(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """A memory's metadata for an answer: the text of a flagged memory merged into it withheld."""
        merged = metadata.get("merged_from")
        if self.show_flagged or not isinstance(merged, list):
            return metadata
        shown = []
        for entry in merged:
            rules = record.flagged(entry) if isinstance(entry, dict) else ()
            if rules:
                entry = {"id": entry.get("id"), "content": self.marker(rules), "withheld": flagged.withheld(rules)}
            shown.append(entry)
        return {**metadata, "merged_from": shown}

    def flagged_seen(self, graph: SoulGraph, where: Callable[[Node], bool] | None) -> list[Node]:
        """The flagged memories this reader sees."""
        return [graph.nodes[i] for i in sorted(flagged.ids(graph, self.soul.seq))
                if i in graph.nodes and (where is None or where(graph.nodes[i]))]

    def seen(self, node_ids: Any) -> list[str]:
        """Those of `node_ids` the reader sees, sorted: another user's never named."""
        nodes = self.soul.loaded.nodes
        return sorted(i for i in node_ids if i in nodes and self.reader.sees(nodes[i]))

    def where(self, graph: SoulGraph, also: Callable[[Node], bool] | None = None) -> Callable[[Node], bool] | None:
        """The reader's predicate for the engine's reads (None: nothing to hide)."""
        return self.reader.where(graph, also)

    def own(self, graph: SoulGraph, node_id: str) -> Node:
        """The node if it is in the reader's own scope, which alone its tools may change: a
        server serving one user reads the shared memories but does not change them."""
        node = self.get(graph, node_id)
        if node.scope != self.reader.scope:
            raise ToolError(f"{node_id} is shared, and this server serves {self.reader.scope}: it may change that "
                            "user's memories only (the shared ones are the operator's)")
        return node

    def get(self, graph: SoulGraph, node_id: str) -> Node:
        """The node if the reader sees it, else the engine's unknown-id error (as a tool error)."""
        try:
            return self.reader.get(graph, node_id)
        except SoulGraphError as exc:
            raise ToolError(str(exc)) from None

    def view(self, node: Node, **extra: Any) -> dict[str, Any]:
        """A node on its own (the answer of a write): everything about it."""
        graph = self.soul.loaded
        rules = record.flagged(node.metadata)
        withheld = rules and not self.show_flagged
        view = {
            "id": node.id,
            "content": self.marker(rules) if withheld else node.content,
            "tags": [] if withheld else node.tags,
            "pinned": node.pinned,
            "access_count": node.access_count,
            "created_at": _iso(node.created_at),
            "last_accessed": _iso(node.last_accessed),
            "parents": self.seen(graph.parents.get(node.id, ())),
            "children": self.seen(graph.children.get(node.id, ())),
        }
        if node.kind != record.DEFAULT_KIND or rules:
            view["kind"] = node.kind
        if node.scope:
            view["scope"] = node.scope
        if withheld:
            view["withheld"] = flagged.withheld(rules)  # no metadata: its values are writer text too
        else:
            if rules:
                view["flagged"] = flagged.withheld(rules)
            if node.metadata:
                view["metadata"] = self.metadata(node.metadata)
        view.update(extra)
        return view

    def hits(self, hits: list[Hit]) -> list[dict[str, Any]]:
        return [self.brief(h.node, score=round(h.score, 4), via=h.via) for h in hits]

    def read(self) -> SoulGraph:
        try:
            return self.soul.graph()
        except SoulFileError as exc:
            raise ToolError(str(exc)) from None

    def change(self, operation: Callable[[SoulGraph], T]) -> T:
        """Apply `operation` under the file lock and save; a refusal becomes a tool error."""
        try:
            with self.soul.change() as graph:
                return operation(graph)
        except (SoulGraphError, SoulFileError) as exc:
            raise ToolError(str(exc)) from None
        except OSError as exc:  # the store names its files; this is a last line, never a bare traceback
            raise ToolError(f"{exc.filename or self.soul.path}: {exc.strerror or exc}; the change was not made") from None


def _cursor_offset(cursor: str) -> int:
    """soul_by_tag's cursor: `o<offset>` (opaque to the agent)."""
    if not cursor:
        return 0
    if not re.fullmatch(r"o\d{1,9}", cursor):
        raise ToolError(f"cursor: {cursor!r} is not a cursor soul_by_tag gave (pass next_cursor as it came)")
    return int(cursor[1:])


def preload_after_handshake(soul: SoulFile):
    """Middleware: read a big soul file once the client has its tool list, not while it waits.

    Parsing JSON holds the GIL; done during the handshake it would delay `tools/list` by the
    whole read. Hermes lists tools at start and calls them only when the model decides to, so
    the read fits in between. A client that never lists tools still gets it a second after
    the handshake.
    """

    async def middleware(ctx: Any, call_next: Callable[[Any], Any]) -> Any:
        result = await call_next(ctx)
        if ctx.method in ("tools/list", "notifications/initialized"):
            delay = 0.05 if ctx.method == "tools/list" else 1.0  # 50 ms: the answer is out by then
            asyncio.get_running_loop().call_later(delay, soul.preload)
        return result

    return middleware


def build_server(soul: SoulFile, *, preload: bool = False, toolsets: tuple[str, ...] = DEFAULT_TOOLSETS,
                 markdown_folder: files.Folder | None = None, ask_timeout: float = 60.0,
                 structured_only: bool = False, embed: bool = True,
                 scope: str = scopes.SHARED, show_flagged: bool = False) -> MCPServer:
    """The server with the tools of `toolsets` (TOOLSETS); the default is the 13 graph tools.
    `structured_only`: answers carry structuredContent alone, no text copy (server/answers.py).
    `scope`: the user whose memories it serves besides the shared ones (memory/scopes.py).
    `show_flagged`: flagged memories' text in tool answers (an operator's own session; never
    in prime or the snapshot)."""
    wrong = problem(tuple(toolsets))
    if wrong:
        raise ValueError(wrong)
    tools = SoulTools(soul, embed=embed, reader=scopes.Reader(scopes.check(scope)), show_flagged=show_flagged)
    server = MCPServer(
        name="soul",
        version=__version__,
        instructions=(
            "Long-term memory kept as a graph. Call soul_prime once at session start; "
            "soul_related before building on earlier work; soul_add then soul_link to record "
            "what a new memory was built on; soul_pin for axioms; soul_explore/soul_promote for hypotheses."
        ),
        log_level="WARNING",
        middleware=[preload_after_handshake(soul)] if preload else (),
    )
    server.middleware.append(tool_calls(server.list_tools, structured_only=structured_only))
    tool = tool_registrar(server)

    @tool(READ)
    async def soul_prime(context: Context = "", limit: Limit = 10,
                         max_chars: Annotated[int, Field(ge=0, le=20_000, description="Budget of the snapshot text (0: none).")] = snapshot.DEFAULT_MAX_CHARS,
                         ) -> shapes.Primed:
        """Call once at the start of a session. Returns `snapshot`, compact text of what to
        keep in mind (identity, commitments, preferences, projects, recent work) within
        `max_chars`; the hottest memories (pinned axioms first); and, when `context`
        describes the task at hand, the memory that best matches it with a short walk to
        what it was built on and what was built on it."""
        graph = tools.read()
        tools.vectors.ready(graph)  # a session starts here: start loading the vectors, if not yet
        where = tools.where(graph)
        primed = prime(graph, context, limit, where, flagged.excluded(graph, tools.reader.hidden_ids(graph), soul.seq))
        focus = primed["focus"]
        return {
            "snapshot": snapshot.render(graph, max_chars, where=where) if max_chars else "",
            "hot": [tools.brief(n) for n in primed["hot"]],
            "focus": tools.view(focus.node, score=round(focus.score, 4)) if focus else None,
            "walk": [tools.brief(n, depth=d, relation=r) for n, d, r in primed["walk"]],
        }

    @tool(READ)
    async def soul_related(query: QueryText, limit: Limit = 10, hint: Hint = "") -> shapes.Results:
        """What earlier work is this built on? Searches memories for `query`, then adds each
        hit's DAG parents and children, so the old foundation under a recent match is found
        too. Use before building on earlier work. Ranked as `soul_query` ranks (a question's
        candidates reranked, about 2 ms)."""
        graph = tools.read()
        return {"results": tools.hits(ranking.related(graph, query, limit, hint=hint or None, vectors=tools.vectors,
                                                      exclude=tools.reader.hidden_ids(graph)))}

    @tool(READ)
    async def soul_query(query: QueryText = "", limit: Limit = 10, hint: Hint = "", tag: Tag | None = None,
                         include_archived: Annotated[bool, Field(description="Also search superseded, contradicted and archived memories.")] = False,
                         kind: Kind | None = None,
                         status: Status | None = None,
                         created_after: Annotated[str, Field(max_length=40, description="Only memories written at or after this ISO 8601 date/datetime (UTC if no zone).")] = "",
                         created_before: Annotated[str, Field(max_length=40, description="Only memories written before this ISO 8601 date/datetime.")] = "",
                         valid_at: Annotated[str, Field(max_length=40, description="What was true at this ISO 8601 date/datetime (superseded memories included).")] = "",
                         about: Annotated[str, Field(max_length=200, description="Only memories about this person, place, organisation, project or other named thing, e.g. 'Priya' (also reaches 'Priya Patel'). With no query: what is known about it, typed memories first, newest first.")] = "",
                         ) -> shapes.Results:
        """Plain search over memories: rarer shared words count more; recently used, confirmed
        and confident memories rank a little higher; near-copies do not crowd the list, and a
        replaced memory that matches brings its replacement. `hint` is a second query merged
        in; `tag` keeps only nodes with it; `kind`, `status` and the time filters narrow it further.
        `about` answers "what do we know about X?": the memories that name X (entities are
        recognised as memories are written), searched by `query` or, without one, all of them;
        when no memory was tagged with X, a search for its words. A question is matched by meaning
        too (with the vectors), and its first 50 candidates are reordered by a reranking stage
        (about 2 ms); a search in words weighs each match's length."""
        try:
            times = {name: filters.parse_time(value, name) if value else None for name, value in
                     (("created_after", created_after), ("created_before", created_before), ("valid_at", valid_at))}
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        accept = filters.where(kinds=(kind,) if kind else (), statuses=(status,) if status else (),
                               created_after=times["created_after"], created_before=times["created_before"],
                               true_at=times["valid_at"])
        graph = tools.read()
        out_of_recall_too = include_archived or times["valid_at"] is not None or status not in (None, record.DEFAULT_STATUS)
        if about.strip():
            about_tags = entities.resolve(graph, about, tools.reader.scope)
        if about.strip() and not about_tags:  # memories written before entities were recognised: by its words
            query = f"{query} {about}".strip()
        elif about.strip():
            if not query.strip():
                found = entities.about(graph, about, limit, scope=tools.reader.scope, tag=tag, where=accept,
                                       include_archived=out_of_recall_too, exclude=tools.reader.hidden_ids(graph),
                                       include_flagged=True)
                return {"results": [tools.brief(n, via=f"about {about.strip()[:80]}") for n in found]}
            accept = entities.where_about(about_tags, accept)
        found = ranking.recall(graph, query, limit, hint=hint or None, tag=tag, where=accept,
                               exclude=tools.reader.hidden_ids(graph),
                               include_archived=out_of_recall_too, vectors=tools.vectors)
        return {"results": tools.hits(found)}

    @tool(READ)
    async def soul_hot(limit: Limit = 10) -> shapes.Results:
        """What the agent has been doing: pinned axioms, then the most recently and most
        often used memories."""
        graph = tools.read()
        return {"results": [tools.brief(n) for n in graph.hot(limit, where=tools.where(graph))]}

    @tool(READ)
    async def soul_discover(node_id: NodeId, depth: Depth = 2, limit: Limit = 50) -> shapes.Walk:
        """Walk the DAG's children from `node_id`: everything built on it, nearest first."""
        graph = tools.read()
        tools.get(graph, node_id)
        found = graph.discover(node_id, depth, where=tools.where(graph))
        return {"from": node_id, "results": [tools.brief(n, depth=d) for n, d in found[:limit]]}

    @tool(READ)
    async def soul_by_tag(tag: Tag, limit: Limit = 50,
                          include_archived: Annotated[bool, Field(description="Also list superseded, contradicted and archived memories.")] = False,
                          cursor: Annotated[str, Field(max_length=40, description="next_cursor from the page before; empty for the first page.")] = "",
                          ) -> shapes.Tagged:
        """Every memory carrying `tag`, hottest first, a page at a time: pass `next_cursor` back
        as `cursor` for the next page (null on the last). A memory used between two pages can
        move, so a long listing may show it twice or miss it once."""
        start = _cursor_offset(cursor)
        graph = tools.read()
        nodes = graph.by_tag(tag, include_archived=include_archived, where=tools.where(graph))
        end = start + limit
        return {"tag": tag, "total": len(nodes), "results": [tools.brief(n) for n in nodes[start:end]],
                "next_cursor": f"o{end}" if end < len(nodes) else None}

    @tool(WRITE)
    async def soul_add(content: Content, tags: Tags = [], parents: Parents = [], pinned: Pinned = False,  # noqa: B006 - the SDK copies defaults
                       kind: Kind | None = None, source: Source = "",
                       confidence: Annotated[Share, Field(description="How sure you are, 0 to 1 (default 0.7).")] = record.DEFAULT_CONFIDENCE,
                       importance: Annotated[Share, Field(description="How much it matters, 0 to 1 (default 0.5).")] = record.DEFAULT_IMPORTANCE,
                       ) -> shapes.View:
        """Record a new memory, decision or belief. Name the nodes it was built on in
        `parents` (or link them later with soul_link). Returns the new node and its id.
        Text holding a secret (a key, a token, a password) is refused: store where the
        secret lives instead. Every user of this agent sees it, unless this server serves one
        user (soul_summary's scope says which)."""
        written = tools.change(lambda graph: remember(
            graph, content, tags, writer="tool:soul_add", parents=parents, pinned=pinned, kind=kind,
            source=source, confidence=confidence, importance=importance, where="soul_add", scope=tools.reader.scope))
        return tools.view(written.node, **({"warnings": written.warnings} if written.warnings else {}))

    @tool(IDEMPOTENT_WRITE)
    async def soul_link(parent_id: NodeId, child_id: NodeId) -> shapes.Linked:
        """Record lineage: `child_id` was built on `parent_id`. An edge that would close a
        cycle is refused."""
        def link(graph: SoulGraph) -> bool:
            parent, child = tools.get(graph, parent_id), tools.own(graph, child_id)
            if parent.scope and not child.scope:
                raise ToolError(f"{child_id} is shared and {parent_id} is one user's: a shared memory cannot be "
                                "built on a user's (every user would be led to it)")
            return graph.link(parent_id, child_id)

        added = tools.change(link)
        return {"parent": parent_id, "child": child_id, "linked": True, "already_linked": not added}

    @tool(IDEMPOTENT_WRITE)
    async def soul_pin(node_id: NodeId, pinned: Pinned = True) -> shapes.View:
        """Pin a memory as an axiom: it never decays and always leads soul_hot and
        soul_prime. `pinned=false` unpins it."""
        node = tools.change(lambda graph: lifecycle.pin(graph, tools.own(graph, node_id).id, pinned,
                                                        writer="tool:soul_pin"))
        return tools.view(node)

    @tool(WRITE)
    async def soul_splay(node_id: NodeId) -> shapes.View:
        """Mark a memory as used just now: it moves to the top of soul_hot and ranks a
        little higher in searches."""
        node = tools.change(lambda graph: graph.splay(tools.get(graph, node_id).id))
        return tools.view(node)

    @tool(WRITE)
    async def soul_explore(content: Content, tags: Tags = [], parents: Parents = []) -> shapes.Explored:  # noqa: B006
        """Try out a hypothesis without changing the graph: it goes into the exploration
        branch, built on `parents`. Returns it with the memories it relates to. Use
        soul_promote to accept it."""
        written = tools.change(lambda graph: explore_memory(graph, content, tags, parents=parents, where="soul_explore",
                                                            scope=tools.reader.scope))
        node = written.node
        graph = soul.loaded
        related = ranking.related(graph, content, 5, exclude=tools.reader.hidden_ids(graph))
        answer = {"hypothesis": tools.hypothesis(node, graph.branch_parents[node.id]),
                  "related": tools.hits(related)}
        if written.warnings:
            answer["warnings"] = written.warnings
        return answer

    @tool(WRITE)
    async def soul_promote(node_id: NodeId,
                           discard: Annotated[bool, Field(description="true: drop the hypothesis instead of accepting it.")] = False,
                           ) -> shapes.View:
        """Accept a hypothesis from soul_explore: move that one node into the graph, with its
        edges to its parents (a parent that is still a hypothesis must be promoted first).
        `discard=true` drops it instead. soul_summary lists the open hypotheses."""
        def hypothesis(graph: SoulGraph) -> str:
            held = graph.branch.get(node_id)
            if held is not None and not tools.reader.sees(held):
                raise ToolError(f"{node_id!r} is not a hypothesis in the exploration branch")
            return node_id

        if discard:
            node = tools.change(lambda graph: graph.discard(hypothesis(graph)))
            return tools.view(node, status="discarded")
        node = tools.change(lambda graph: graph.promote(hypothesis(graph)))
        return tools.view(node)

    @tool(READ)
    async def soul_summary(limit: Limit = 5) -> shapes.Summary:
        """Counts (nodes, edges, pins, tags, open hypotheses), the hottest memories, and the
        open hypotheses themselves (newest first, up to 50: promote or discard them with
        soul_promote)."""
        graph = tools.read()
        where = tools.where(graph)
        summary = graph.summary(limit, where=where)
        summary["hot"] = [tools.brief(n) for n in summary["hot"]]
        summary["open_hypotheses"] = [tools.hypothesis(n, parents) for n, parents in graph.hypotheses(where=where)[:50]]
        held = tools.flagged_seen(graph, where)
        if held:
            summary["withheld"] = {"memories": len(held), "reason": flagged.REASON,
                                   "operator": f"{flagged.COMMAND} {soul.path}"}
            if not tools.show_flagged:  # a flagged memory's tags are its writer's text too
                tags = summary["tags"]
                for node in held:
                    for tag in node.tags:
                        tags[tag] = tags.get(tag, 1) - 1
                summary["tags"] = {tag: count for tag, count in tags.items() if count > 0}
        summary["soul_file"] = str(soul.path)
        tools.vectors.ready(graph)  # asked what search is: start loading the vectors, if not yet
        summary["search"] = tools.vectors.status()
        summary["scanner"] = scanner_summary()
        summary["scope"] = scope_summary(graph, tools.reader)
        return summary

    # The capabilities the server advertises are real: one resource and one prompt.
    @server.resource("soul://snapshot", name="snapshot", mime_type="text/plain",
                     description="What to keep in mind now (identity, commitments, preferences, projects, recent "
                                 "work) as compact text within 2,200 characters: soul_prime's snapshot.")
    def snapshot_resource() -> str:
        graph = tools.read()
        return snapshot.render(graph, snapshot.DEFAULT_MAX_CHARS, where=tools.where(graph))

    @server.prompt(name="soul_session_start",
                   description="Start a session with the soul graph: the snapshot, and what to call when.")
    def session_start(task: str = "") -> str:
        graph = tools.read()
        text = snapshot.render(graph, snapshot.DEFAULT_MAX_CHARS, where=tools.where(graph)) or "(the soul graph is empty)"
        ask = f"\nThe task: {task}\nCall soul_prime with it as context, then soul_related before building on earlier work." \
            if task else "\nCall soul_prime with the task as context once you know it."
        return f"Your long-term memory (soul graph) holds:\n\n{text}{ask}"

    server.soul_tools = tools  # main() saves the vectors through it when the server stops
    markdown_folder = markdown_folder or files.Folder(soul.path.parent)
    if "memory" in toolsets:
        memory_tools.register(server, tools, markdown_folder)  # a forget takes a note out of MEMORY.md too
    if "markdown" in toolsets:
        markdown_tools.register(server, tools, markdown_folder, ask_timeout)
    return server


def prime(graph: SoulGraph, context: str, limit: int, where: Callable[[Node], bool] | None,
          excluded: Any) -> dict[str, Any]:
    """`SoulGraph.prime` without the flagged memories (memory/flagged.py): not in hot, never the
    focus, not on the walk. The focus search leaves them out as it goes (`excluded`: the
    flagged ids and those the reader must not see, with the word index's mask), so it stays the
    engine's pruned search; hot and the walk take `where` (the reader's) and not flagged, node
    by node, and so does the focus found, once more."""
    shown = flagged.where(where)
    primed = graph.prime("", limit, where=shown)  # hot alone: no context, no search
    found = graph.query(context, 1, exclude=excluded) if context.strip() else []
    focus = found[0] if found and shown(found[0].node) else None
    walk: list[tuple[Node, int, str]] = []
    if focus is not None:
        walk = [(node, d, "ancestor") for node, d in graph.ancestors(focus.node.id, PRIME_DEPTH, where=shown)]
        walk += [(node, d, "descendant") for node, d in graph.discover(focus.node.id, PRIME_DEPTH, where=shown)]
        walk = [step for step in walk if step[0].status == record.DEFAULT_STATUS]
    return {"hot": primed["hot"], "focus": focus, "walk": walk[: 2 * limit]}


PRIME_DEPTH = 2  # the engine's prime walks two edges each way


def scanner_summary() -> dict[str, Any]:
    """The scanner's own record, without the training details an agent has no use for."""
    from soulgraph.memory import scanner  # loads the scanner: a summary is asked for rarely

    status = scanner.status()
    return {key: status[key] for key in ("detector", "rules", "confusables", "threshold", "features", "version")
            if key in status}


def scope_summary(graph: SoulGraph, reader: scopes.Reader) -> dict[str, Any]:
    """What soul_summary says of the scope it serves, and of those it does not."""
    hidden = reader.hidden(graph)
    if reader.scope:
        note = f"the shared memories and those of {reader.scope}; writes are {reader.scope}'s"
    else:
        note = "the shared memories only, seen by every user of this agent; writes are shared"
    if hidden:
        note += (f". {len(hidden)} other user(s) have memories here that this server does not show "
                 "(an MCP tool call does not say who asks: start it with --scope platform:user to serve one user)")
    return {"serves": reader.name, "users_not_served": len(hidden), "note": note}


def _number_up_to(unit: str, most: float) -> Callable[[str], float]:
    """An argparse type: a number more than 0 and at most `most` (`unit` names it in errors)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number of {unit}, got {text!r}") from None
        if not 0 < value <= most:
            raise argparse.ArgumentTypeError(f"must be more than 0 and at most {most:g} {unit}, got {text!r}")
        return value

    return parse


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)
MMAP_THRESHOLD_BYTES = 128 * 1024  # glibc's own starting value


def return_big_buffers_to_the_system() -> None:
    """Fix glibc's mmap threshold for this long-lived process. A buffer above the threshold is
    mapped on its own and goes back to the system when freed, but glibc raises the threshold
    to the largest buffer freed so far (up to 32 MB): after the soul file's first read or
    snapshot (tens of MB of text), the next snapshot's buffers come from the heap and stay
    resident for good (~70 MB at 100,000 memories). Set explicitly, it stays put. Without
    glibc's mallopt (macOS), nothing to do."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m soulgraph.mcp", description="Serve a soul graph over MCP (stdio).")
    parser.add_argument("--soul-file", type=Path, help="the soul graph file (default: $HERMES_HOME/soul.json, else ~/.hermes/soul.json)")
    parser.add_argument("--toolsets", type=parse_toolsets, default=DEFAULT_TOOLSETS,
                        help=f"comma-separated, among {', '.join(TOOLSETS)} (default: graph, the 13 tools)")
    parser.add_argument("--strength-half-life-days", type=_number_up_to("days", 1e6), default=record.STRENGTH_HALF_LIFE / 86400,
                        metavar="DAYS", help="how fast a memory's reinforcement fades without confirmation (default: 30)")
    parser.add_argument("--soul-dir", type=Path, help="where the markdown toolset's relative paths resolve "
                        "(default: the soul file's folder, the Hermes home)")
    parser.add_argument("--allow-outside-soul-dir", action="store_true",
                        help="let the markdown toolset read and write files outside --soul-dir")
    parser.add_argument("--structured-only", action="store_true",
                        help="answer with structuredContent alone, no text copy: for clients that show both to "
                        "the model (Hermes; python -m soulgraph.install writes it into Hermes' entry)")
    parser.add_argument("--no-embed", action="store_true",
                        help="search with words and links only, even where the `embed` extra is installed")
    parser.add_argument("--scope", type=scopes.argument, default=scopes.SHARED, metavar="SCOPE",
                        help="whose memories the tools read and write besides the shared ones: 'shared' (the "
                        "default: the shared memories alone) or one user's, 'platform:user' (e.g. telegram:1001)")
    parser.add_argument("--show-flagged", action="store_true",
                        help="show the text of flagged memories (they read like prompt injection) in tool answers: "
                        "for an operator's own session only, never for an agent's; soul_prime and the snapshot "
                        "leave them out even then")
    parser.add_argument("--ask-timeout", type=_number_up_to("seconds", 3600), default=60.0, metavar="SECONDS",
                        help="soul_ask's deadline for the LLM provider's answer (default: 60)")
    args = parser.parse_args(argv)
    return_big_buffers_to_the_system()  # before the first read: a server lives long and shares its host
    soul = SoulFile(args.soul_file or default_soul_file(), freeze=True, keep_image=True,  # this process serves one graph
                    strength_half_life=args.strength_half_life_days * 86400)
    try:
        still_to_read = soul.open_for_serving()  # refuse to start on a file we cannot read
    except SoulFileError as exc:
        print(f"soulgraph.mcp: {exc}", file=sys.stderr)
        return 1
    folder = files.Folder((args.soul_dir or soul.path.parent).expanduser().absolute(), args.allow_outside_soul_dir)
    server = build_server(soul, preload=still_to_read, toolsets=args.toolsets, markdown_folder=folder,
                          ask_timeout=args.ask_timeout, structured_only=args.structured_only,
                          embed=not args.no_embed, scope=args.scope, show_flagged=args.show_flagged)
    try:
        anyio.run(stdio.serve, server)  # the SDK's stdio, answering lines it cannot parse (server/stdio.py)
    finally:
        server.soul_tools.vectors.save()  # the next start reads them instead of embedding again
    return 0


if __name__ == "__main__":
    sys.exit(main())
