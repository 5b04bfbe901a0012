"""`python -m soulgraph.hermes.memory_service --soul-file PATH`: the soul graph behind Hermes'
memory provider.

Hermes loads its memory provider into its own process, from its own venv, maybe on another
Python than ours. So the plugin Hermes loads (`soulgraph/hermes/plugin/`) is a shim written
against the standard library only: it starts this process from our release venv and speaks to
it over stdin/stdout, one JSON object per line each way:

    {"id": 7, "op": "recall", "args": {"query": "...", "budget": 1500}}
    {"id": 7, "ok": true, "result": {"text": "...", "ids": ["n12", ...]}}
    {"id": 8, "ok": false, "error": "unknown op 'recal' (known: ...)", "retry": false}

Requests are answered in order. Every line but a blank one gets an answer, and none ends the
process: a request that is not JSON, not an object, names no known op, or whose args are
missing, unknown or of the wrong type is answered with an error naming the problem (id null
when its id cannot be read) and logged on stderr, one line each. `retry` says whether sending
the same request again may succeed (the store was busy or failed) or never will (the request
itself is wrong).

Writes are idempotent by the id their sender gives them (`turn_id` for `sync_turn`, `write_id`
for `memory_write`): the id is kept in the written memory's metadata, in the soul file, so a
service started after a crash still knows what it stored, and a request sent again after a
lost answer is acknowledged with the memory already there instead of writing it twice.

Every op but `hello` and `status` takes `scope`, the user the plugin is serving
(memory/scopes.py: `platform:user`, or "" for shared): reads see the shared memories and that
user's, never another's; writes land in that user's scope.

The graph lives here, in one `SoulFile` shared with the MCP server under the store's lock
(either one sees the other's writes before answering). Every write goes through
`memory.write.remember`, so the scanner applies as for any other write.

Ops: `hello`, `snapshot`, `recall`, `sync_turn`, `consolidate`, `memory_write`, `status`.

What goes into Hermes' prompt from here (the snapshot, recall's lines, consolidation's summary
for the compression prompt) never holds a flagged memory (memory/flagged.py: its text reads
like prompt injection): they are left out, and a write's answer names one by id alone.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, TextIO

from soulgraph import __version__
from soulgraph.engine import record
from soulgraph.engine.graph import ACTIVE, SoulGraph
from soulgraph.engine.index import words
from soulgraph.hermes import consolidate as consolidation, turns
from soulgraph.memory import entities, flagged, lifecycle, ranking, scopes, snapshot, snippets, updates, upkeep
from soulgraph.memory.write import RefusedMemory, remember
from soulgraph.store import SoulFile, SoulFileError, default_soul_file
from soulgraph.store.vectors import VectorStore, vectors_path

RECALL_BUDGET = 1500  # characters of recalled memory injected before a turn
RECALL_LIMIT = 8
# The reranking stage (memory/rerank.py) orders what prefetch injects, as it does the tools'
# answers: on LoCoMo, each conversation held out of its fitting, the share of evidence injected
# went 0.657 -> 0.746 (bench/train_reranker.py; docs/decisions/reranker.md). False: recall's order.
PREFETCH_STAGE = True
SNAPSHOT_CHARS = 2200
MIRROR_WRITER = "hermes:memory_tool"
LATER_NOTE = "a later memory says"  # a recall line's note of a newer value shown beside it (memory/updates.py)
# Hermes' built-in memory targets and how the seeder tags their entries (hermes/seed.py).
MIRROR_TARGETS = {"memory": ("memory", "note"), "user": ("user", "semantic_fact")}
# The longest request line read (characters); a longer one is refused whole, unread. The
# plugin holds its requests to the same bound (plugin/__init__.py MAX_LINE_CHARS).
MAX_LINE_CHARS = 64 << 20
MAX_COUNT = 1_000_000  # budgets and limits: more than any prompt holds
MAX_MESSAGES = 100_000
TURN_ID = "turn_id"  # metadata keys of the sender's ids (idempotent writes)
WRITE_ID = "write_id"
MAX_SENDER_ID = 200  # characters of a turn_id / write_id


class ServiceError(Exception):
    """A request this service refuses; the message says why."""


# What each op takes: arg name -> (what it must be, check). A request is checked against this
# before its op runs, so a wrong one is refused by name instead of failing deep inside.
def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT


def _is_object(value: Any) -> bool:
    return isinstance(value, dict)


def _is_sender_id(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_SENDER_ID


TEXT = ("a string", _is_text)
COUNT = (f"an integer from 0 to {MAX_COUNT:,}", _is_count)
OBJECT = ("a JSON object", _is_object)
SENDER_ID = (f"a non-empty string of at most {MAX_SENDER_ID} characters", _is_sender_id)


def _is_scope(value: Any) -> bool:
    try:
        scopes.check(value)
    except scopes.ScopeError:
        return False
    return True


SCOPE = ("'' (shared) or 'platform:user' (memory/scopes.py)", _is_scope)
MAX_KNOWN = 8  # texts a snapshot request may name as already in the prompt
MAX_KNOWN_CHARS = 200_000  # characters of each
KNOWN = (f"a list of at most {MAX_KNOWN} strings of at most {MAX_KNOWN_CHARS:,} characters",
         lambda v: isinstance(v, list) and len(v) <= MAX_KNOWN
         and all(isinstance(t, str) and len(t) <= MAX_KNOWN_CHARS for t in v))
MESSAGES = (f"a list of at most {MAX_MESSAGES:,} message objects",
            lambda v: isinstance(v, list) and len(v) <= MAX_MESSAGES)
ARGS: dict[str, tuple[dict[str, tuple[str, Callable[[Any], bool]]], frozenset[str]]] = {
    # op: (args it takes, the ones it needs)
    "hello": ({}, frozenset()),
    "status": ({}, frozenset()),
    "snapshot": ({"max_chars": COUNT, "scope": SCOPE, "known": KNOWN}, frozenset()),
    "recall": ({"query": TEXT, "budget": COUNT, "limit": COUNT, "skip_session": TEXT, "scope": SCOPE},
               frozenset({"query"})),
    "sync_turn": ({"user": TEXT, "assistant": TEXT, "session_id": TEXT, "platform": TEXT, "user_id": TEXT,
                   "messages": MESSAGES, "turn_id": SENDER_ID, "scope": SCOPE}, frozenset()),
    "consolidate": ({"session_id": TEXT, "messages": MESSAGES, "scope": SCOPE}, frozenset()),
    "memory_write": ({"action": TEXT, "target": TEXT, "content": TEXT, "metadata": OBJECT, "write_id": SENDER_ID,
                      "scope": SCOPE}, frozenset({"action"})),
}


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
             float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _lone_surrogate(value: Any, where: str) -> str | None:
    """Where in `value` a string holds a lone surrogate (valid JSON, but no text: it cannot be
    written to the soul file). Walked without recursion: nesting as deep as JSON allows is fine."""
    stack = [(value, where)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")  # in C: a long tool result is checked in microseconds
            except UnicodeEncodeError:
                return at
        elif isinstance(item, dict):
            stack.extend((key, f"{at} (a key)") for key in item)
            stack.extend((v, f"{at}.{k}") for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, f"{at}[{n}]") for n, v in enumerate(item))
    return None


def _message_problem(messages: list[Any], where: str) -> str | None:
    """The first thing in a message list that is not a message as Hermes writes one."""
    for n, message in enumerate(messages):
        at = f"{where}[{n}]"
        if not isinstance(message, dict):
            return f"{at} must be a message object, not {_kind(message)}"
        calls = message.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list):
                return f"{at}.tool_calls must be a list, not {_kind(calls)}"
            for c, call in enumerate(calls):
                if not isinstance(call, dict):
                    return f"{at}.tool_calls[{c}] must be an object, not {_kind(call)}"
                if call.get("function") is not None and not isinstance(call["function"], dict):
                    return f"{at}.tool_calls[{c}].function must be an object, not {_kind(call['function'])}"
    return None


def check_request(request: Any) -> tuple[Any, str, dict[str, Any]]:
    """The id, op and args of a well-formed request; ServiceError naming the first problem.
    The id comes back even when something else is wrong, so the error can be matched."""
    if not isinstance(request, dict):
        raise ServiceError(f"a request must be a JSON object, not {_kind(request)}")
    request_id = request.get("id")
    if "id" not in request:
        raise ServiceError("the request has no id (an integer or a string)")
    if isinstance(request_id, bool) or not isinstance(request_id, (int, str)):
        raise ServiceError(f"the request's id must be an integer or a string, not {_kind(request_id)}")
    if isinstance(request_id, str) and len(request_id) > MAX_SENDER_ID:
        raise ServiceError(f"the request's id is longer than {MAX_SENDER_ID} characters")
    if isinstance(request_id, str) and _lone_surrogate(request_id, "id"):
        raise ServiceError("the request's id holds a lone surrogate (\\ud800-\\udfff), which is not text")
    unknown = sorted(set(request) - {"id", "op", "args"}, key=str)
    op = request.get("op")
    if "op" not in request:
        raise _Refused(request_id, f"the request has no op (known: {', '.join(sorted(ARGS))})")
    if not isinstance(op, str):
        raise _Refused(request_id, f"the op must be a string, not {_kind(op)} (known: {', '.join(sorted(ARGS))})")
    if op not in ARGS:
        raise _Refused(request_id, f"unknown op {op!r:.80} (known: {', '.join(sorted(ARGS))})")
    if unknown:
        raise _Refused(request_id, f"{op}: unknown request field(s) {', '.join(repr(k)[:80] for k in unknown[:5])} "
                                   "(a request holds id, op, args)")
    args = request.get("args", {})
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise _Refused(request_id, f"{op}: args must be a JSON object, not {_kind(args)}")
    takes, needs = ARGS[op]
    strange = sorted(set(args) - set(takes))
    if strange:
        known = ", ".join(takes) or "none"
        raise _Refused(request_id, f"{op}: unknown arg(s) {', '.join(repr(a)[:80] for a in strange[:5])} "
                                   f"(it takes: {known})")
    missing = sorted(needs - set(args))
    if missing:
        raise _Refused(request_id, f"{op}: missing arg(s) {', '.join(missing)}")
    for name, value in args.items():
        if value is None and name not in needs:
            continue  # null stands for the default, as an absent arg does
        what, check = takes[name]
        if not check(value):
            raise _Refused(request_id, f"{op}: args.{name} must be {what}, not {_kind(value)}"
                           + (f" ({value!r:.40})" if isinstance(value, (int, float)) else ""))
        if name == "messages":
            problem = _message_problem(value, f"args.{name}")
            if problem:
                raise _Refused(request_id, f"{op}: {problem}")
    surrogate = _lone_surrogate(args, "args")
    if surrogate:
        raise _Refused(request_id, f"{op}: {surrogate} holds a lone surrogate (\\ud800-\\udfff), which is not text")
    return request_id, op, {k: v for k, v in args.items() if v is not None}


class _Refused(ServiceError):
    """A refusal of a request whose id could be read."""

    def __init__(self, request_id: Any, message: str) -> None:
        super().__init__(message)
        self.request_id = request_id


class MemoryService:
    def __init__(self, soul: SoulFile, *, embed: bool = True, vectors: VectorStore | None = None) -> None:
        self.soul = soul
        self.stderr: TextIO = sys.stderr
        # Vectors for recall's questions (store/vectors.py); lexical until they are ready.
        self.vectors = vectors or VectorStore(vectors_path(soul.path), enabled=embed)
        self.ops: dict[str, Callable[..., Any]] = {
            "hello": self.hello, "snapshot": self.snapshot, "recall": self.recall, "sync_turn": self.sync_turn,
            "consolidate": self.consolidate, "memory_write": self.memory_write, "status": self.status,
        }

    def handle(self, request: Any) -> dict[str, Any]:
        """One request object to one response object; never raises (an error in an op is
        answered and logged with its traceback, and the service goes on)."""
        request_id, name = None, "request"
        try:
            try:
                request_id, name, args = check_request(request)
            except _Refused as exc:
                return self.refuse(exc.request_id, str(exc), request)
            except ServiceError as exc:
                return self.refuse(None, str(exc), request)
            return {"id": request_id, "ok": True, "result": self.ops[name](**args)}
        except (SoulFileError, OSError) as exc:  # the store, not the request: it may work next time
            return self.refuse(request_id, str(exc), request, retry=True)
        except (ServiceError, RefusedMemory, ValueError) as exc:
            return self.refuse(request_id, str(exc), request)
        except Exception as exc:  # a fault of ours: answered and logged, never the end of the service
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            error = f"{name} failed: {type(exc).__name__}: {str(exc)[:200]}"
            self.log(f"request id={request_id!r:.60}: {error} (at {Path(frame.filename).name}:{frame.lineno})")
            return self.refuse(request_id, error, request, logged=False)

    def refuse(self, request_id: Any, error: str, request: Any, *, retry: bool = False,
               logged: bool = True) -> dict[str, Any]:
        """The error answer to `request`, logged on stderr (unless the caller logged it)."""
        if logged:
            op = request.get("op") if isinstance(request, dict) else None
            self.log(f"refused request id={request_id!r:.60} op={op!r:.40}: {error}")
        return {"id": request_id, "ok": False, "error": error, "retry": retry}

    def log(self, line: str) -> None:
        """One line on stderr (the plugin sends it to $HERMES_HOME/logs/soulgraph-memory.log)."""
        # One line, and text any log can take (a lone surrogate in a refused op is escaped).
        line = " ".join(line.split()).encode("utf-8", "backslashreplace").decode("utf-8")
        try:
            print(f"soulgraph memory service: {line}", file=self.stderr, flush=True)
        except (OSError, ValueError):
            pass  # a closed log is no reason to stop answering

    # ------------------------------------------------------------------ reads
    def hello(self) -> dict[str, Any]:
        return {"version": __version__, "soul_file": str(self.soul.path)}

    def graph(self) -> SoulGraph:
        return self.soul.graph()

    def snapshot(self, max_chars: int = SNAPSHOT_CHARS, scope: str = scopes.SHARED,
                 known: list[str] | None = None) -> dict[str, Any]:
        """The block for Hermes' system prompt. `known`: what that prompt already holds (Hermes'
        own MEMORY.md, USER.md and SOUL.md, as the plugin read them), never repeated."""
        graph = self.graph()
        return {"text": snapshot.render(graph, int(max_chars), where=scopes.Reader(scope).where(graph),
                                        known=known or ())}

    def recall(self, query: str, budget: int = RECALL_BUDGET, limit: int = RECALL_LIMIT,
               skip_session: str = "", scope: str = scopes.SHARED) -> dict[str, Any]:
        """`soul_related`'s ranking for the coming turn, as compact lines within `budget`
        characters; the current session's own turns are left out (they are in the context).
        Only the shared memories and `scope`'s are looked at."""
        graph = self.graph()
        skip = graph.tags.get(turns.session_tag(skip_session), set()) if skip_session else set()
        # Asked a little deeper to make up for the session's own turns left out, but never
        # deeper than twice the limit: a long session must not make every recall a deep one.
        depth = int(limit) + min(len(skip), int(limit)) + 2
        # Flagged memories are left out as the search goes (they take no place), and checked
        # again one by one: none reaches the prompt.
        exclude = flagged.excluded(graph, scopes.Reader(scope).hidden_ids(graph), version=self.soul.seq)
        now = graph.clock()
        found = ranking.related(graph, query, depth, vectors=self.vectors, exclude=exclude, stage=PREFETCH_STAGE)
        # The named things the turn is about (not the ones named everywhere) lift what is held of them.
        tags = entities.query_tags(graph, query, scope)
        if tags:
            found = entities.boost(graph, found, tags, scope=scope, exclude=exclude, extra=0)
        def shown_here(node: Any) -> bool:  # what prefetch may show of a memory ranking found or named
            return (node.id not in skip and node.id not in exclude and node.status == ACTIVE
                    and node.privacy == "normal" and node.source != "hermes:session"
                    and not record.flagged(node.metadata) and _valid_now(node, now))

        hits = [h for h in found if shown_here(h.node)]
        shown = {h.node.id for h in hits}
        hits = [h for h in hits if not (h.node.kind == "episodic_event" and _drawn_into(graph, h.node.id, shown))]
        hits = hits[: int(limit)]
        # A memory a later one changed a value of is shown with the one that changed it, and one
        # holding a value the question asks with a later statement of another: the newer stands
        # right above it, in the place of the last hit if need be.
        shown_nodes = _with_changers(graph, query, [h.node for h in hits], int(limit), shown_here)
        # Lines holding the kind of value the question asks for ("when": a date) come first; a
        # newer value for what it asks stands above an older one, and the older one's line names
        # it (memory/updates.py): both are kept, the model sees which is later.
        shown_nodes = updates.answers_first(query, shown_nodes)
        later = updates.later_values(query, shown_nodes)
        shown_nodes = list(updates.newer_first(query, shown_nodes, later))
        heads = [f"- [{time.strftime('%Y-%m-%d', time.gmtime(node.seen_at))}, {node.kind}"
                 f"{_since_updated(graph, node)}{_later_said(node, later)}] " for node in shown_nodes]
        # Each memory a fair share of the budget, a long one by its sentences that hold the
        # question's words (memory/snippets.py): one long turn does not push out the rest.
        asked = {word: graph.index.idf(word) for word in words(query)}
        fitted = snippets.fit(heads, [node.content for node in shown_nodes], int(budget), asked)
        return {"text": "\n".join(line for _i, line in fitted), "ids": [shown_nodes[i].id for i, _line in fitted]}

    def status(self) -> dict[str, Any]:
        graph = self.graph()
        self.vectors.ready(graph)  # starts loading them, if not yet
        return {"soul_file": str(self.soul.path), "nodes": len(graph.nodes),
                "turns": len(graph.tags.get(turns.TURN_TAG, ())), "users": len(graph.scopes),
                "search": self.vectors.status()}

    # ------------------------------------------------------------------ writes
    def sync_turn(self, user: str = "", assistant: str = "", session_id: str = "", platform: str = "",
                  user_id: str = "", messages: list[dict[str, Any]] | None = None,
                  turn_id: str | None = None, scope: str = scopes.SHARED) -> dict[str, Any]:
        """One completed turn, in `scope`. `turn_id`: the sender's id for it; a turn already
        stored under that id is acknowledged (`"stored": "already"`) and not written again."""
        if not (user or "").strip() and not (assistant or "").strip():
            return {"id": None, "skipped": "empty turn"}
        if turn_id:
            held = _turn_stored(self.graph(), session_id, turn_id, scope)
            if held is not None:
                return {"id": held, "stored": "already", "redacted": [], "warnings": []}
        with self.soul.change() as graph:
            # Asked again under the lock: another writer of this file may have stored it since.
            held = _turn_stored(graph, session_id, turn_id, scope) if turn_id else None
            if held is not None:
                return {"id": held, "stored": "already", "redacted": [], "warnings": []}
            written = turns.record_turn(graph, user, assistant, session_id=session_id, platform=platform,
                                        user_id=user_id, messages=messages,
                                        metadata={TURN_ID: turn_id} if turn_id else None, scope=scope)
        return {"id": written.node.id, "stored": "now", "redacted": list(written.redacted),
                "warnings": written.warnings}

    def consolidate(self, session_id: str = "", messages: list[dict[str, Any]] | None = None,
                    scope: str = scopes.SHARED) -> dict[str, Any]:
        with self.soul.change() as graph:
            result = consolidation.consolidate(graph, session_id, messages, scope)
            held = {i for _k, i, _c in result.added if i in graph.nodes and record.flagged(graph.nodes[i].metadata)}
            # Upkeep of this user's memories, bounded so a session's end stays cheap (memory/upkeep.py).
            kept = upkeep.apply(graph, upkeep.plan(graph, where=lambda n: n.scope == scope,
                                                   deadline=upkeep.SESSION_DEADLINE))
        # The summary goes into Hermes' compression prompt: a flagged memory is not in it.
        result.added = [(k, i, c) for k, i, c in result.added if i not in held]
        return {"added": [{"kind": k, "id": i, "content": c} for k, i, c in result.added],
                "withheld": [{"id": i, **flagged.withheld(graph.nodes[i])} for i in sorted(held) if i in graph.nodes],
                "confirmed": [{"kind": k, "id": i} for k, i in result.confirmed],
                "updated": [{"id": u.old_id, "by": u.new_id, "old": u.old, "new": u.new} for u in result.updated],
                "refused": result.refused, "flagged": result.flagged, "turns": result.turns, **kept,
                "summary": result.summary()}

    def memory_write(self, action: str, target: str = "memory", content: str = "",
                     metadata: dict[str, Any] | None = None, write_id: str | None = None,
                     scope: str = scopes.SHARED) -> dict[str, Any]:
        """Mirror Hermes' built-in memory tool: add adds, replace supersedes the entry holding
        `metadata.old_text`, remove archives it; all in `scope` (a replace or remove finds only
        that user's entries). `write_id`: the sender's id for this write; an add or replace
        already stored under it is acknowledged, not written again (a remove done twice finds
        nothing the second time)."""
        if target not in MIRROR_TARGETS:
            raise ServiceError(f"unknown memory target {target!r} (known: {', '.join(MIRROR_TARGETS)})")
        if action not in ("add", "replace", "remove"):
            raise ServiceError(f"unknown memory action {action!r} (known: add, replace, remove)")
        tag, kind = MIRROR_TARGETS[target]
        old_text = str((metadata or {}).get("old_text") or "")
        session = str((metadata or {}).get("session_id") or "") or None
        with self.soul.change() as graph:
            held = _write_stored(graph, tag, write_id, scope) if write_id and action != "remove" else None
            if held is not None:
                return {"id": held, "stored": "already", "superseded": None, "warnings": []}
            old = _entry_holding(graph, tag, old_text or content, scope) if action != "add" else None
            if action == "remove":
                if old is None:
                    return {"archived": None, "note": "no mirrored entry holds that text"}
                lifecycle.archive(graph, old, writer=MIRROR_WRITER, reason="removed with Hermes' memory tool")
                return {"archived": old}
            if not content.strip():
                raise ServiceError(f"{action}: the entry's content is empty")
            written = remember(graph, content.strip(), [tag], writer=MIRROR_WRITER, kind=kind,
                               source=f"hermes:memory_tool:{target}", source_ref=session, where="memory_write",
                               metadata={WRITE_ID: write_id} if write_id else None, scope=scope)
            if old is not None:
                lifecycle.supersede(graph, old, written.node.id, writer=MIRROR_WRITER,
                                    reason="replaced with Hermes' memory tool")
        return {"id": written.node.id, "superseded": old, "warnings": written.warnings}


def _valid_now(node: Any, now: float) -> bool:
    """What prefetch shows is true now: not a memory whose validity ended or has not begun."""
    return (node.valid_to is None or node.valid_to > now) and (node.valid_from is None or node.valid_from <= now)


def _since_updated(graph: SoulGraph, node: Any) -> str:
    """What later memories changed of this one, for its recall line: "; since updated: 45 sources → 52 sources
    (2024-05-02)" (the newest change of each value)."""
    changes = node.metadata.get(lifecycle.UPDATED) or []
    if not changes:
        return ""
    latest: dict[str, dict[str, Any]] = {}
    for change in changes:
        latest[str(change.get("old"))] = change
    parts = []
    for change in list(latest.values())[-3:]:
        by = graph.nodes.get(str(change.get("by")))
        when = by.created_at if by is not None else float(change.get("at") or 0)
        parts.append(f"{change.get('old')} → {change.get('new')} ({time.strftime('%Y-%m-%d', time.gmtime(when))})")
    return "; since updated: " + ", ".join(parts)


def _drawn_into(graph: SoulGraph, node_id: str, shown: Any) -> bool:
    """A memory consolidation drew from this turn is among `shown`: a turn is not shown beside
    it (that memory says it)."""
    return any(graph.nodes[c].source == consolidation.SOURCE for c in set(shown).intersection(graph.children.get(node_id, ())))


def _with_changers(graph: SoulGraph, query: str, nodes: list[Any], limit: int,
                   visible: Callable[[Any], bool]) -> list[Any]:
    """`nodes`, each one preceded by the newer memory that changed a value it holds, if not
    shown already: one a later memory changed (lifecycle.revise), by the newest of those it can
    see; one holding a value of what the question asks, by a later statement of another value
    for it that the graph's search finds (updates.later_statements). At most `limit`, the
    lowest-ranked of the others dropped for them."""
    out, paired = list(nodes), set()

    def pair(older: Any, newer: Any) -> None:
        shown = [n.id for n in out]
        if newer.id in shown or older.id not in shown or _drawn_into(graph, newer.id, shown):
            return
        out.insert(shown.index(older.id), newer)
        paired.update((older.id, newer.id))

    for node in nodes:
        changes = node.metadata.get(lifecycle.UPDATED) or []
        newer = next((graph.nodes[c["by"]] for c in reversed(changes)
                      if isinstance(c, dict) and c.get("by") in graph.nodes and visible(graph.nodes[c["by"]])), None)
        if newer is not None:
            pair(node, newer)
    for later in updates.later_statements(graph, query, nodes, visible):
        pair(later.older, later.newer)
    while len(out) > limit:  # the lowest-ranked line that is not one of a pair makes room
        spare = next((i for i in range(len(out) - 1, -1, -1) if out[i].id not in paired), len(out) - 1)
        del out[spare]
    return out


def _later_said(node: Any, later: list[Any]) -> str:
    """What newer memories shown beside this one say, as a change, of the value the question asks
    about: "; a later memory says 52 (2024-05-02)". A newer value said with no update cue only
    moves up (it may be a second, different quantity); one said as a change is named here too,
    and both lines stay for the model to weigh."""
    said = {}
    for pair in later:
        if pair.older.id == node.id and pair.new.cued:
            said[pair.new.text] = max(said.get(pair.new.text, 0.0), pair.newer.seen_at)
    if not said:
        return ""
    parts = [f"{text} ({time.strftime('%Y-%m-%d', time.gmtime(at))})" for text, at in list(said.items())[-3:]]
    return f"; {LATER_NOTE} " + ", ".join(parts)


def _turn_stored(graph: SoulGraph, session_id: str, turn_id: str, scope: str) -> str | None:
    """The memory holding the turn sent under `turn_id`, if one does (a session's own turns
    are searched: a resent turn names the same session and user)."""
    return next((n.id for n in turns.session_turns(graph, session_id, scope) if n.metadata.get(TURN_ID) == turn_id),
                None)


def _write_stored(graph: SoulGraph, tag: str, write_id: str, scope: str) -> str | None:
    return next((i for i in sorted(graph.tags.get(tag, ()))
                 if graph.nodes[i].scope == scope and graph.nodes[i].metadata.get(WRITE_ID) == write_id), None)


def _entry_holding(graph: SoulGraph, tag: str, text: str, scope: str) -> str | None:
    """The active memory of `tag` in `scope` whose content holds `text` (Hermes finds
    entries by a substring); the newest when several do."""
    needle = " ".join(text.split()).lower()
    if not needle:
        return None
    found = [node for i in graph.tags.get(tag, ()) if (node := graph.nodes[i]).status == ACTIVE
             and node.scope == scope and needle in " ".join(node.content.split()).lower()]
    return max(found, key=lambda n: (n.created_at, n.id)).id if found else None


def serve(service: MemoryService, reader: TextIO, writer: TextIO) -> None:
    """Answer one request per line until the input ends. No line ends the service: one that
    is not JSON, or too long to read, is answered with id null."""
    while True:
        line = reader.readline(MAX_LINE_CHARS + 1)
        if not line:
            return
        if len(line) > MAX_LINE_CHARS and not line.endswith("\n"):
            while line and not line.endswith("\n"):  # the rest of it, unread, in bounded pieces
                line = reader.readline(MAX_LINE_CHARS)
            response = service.refuse(None, f"a request line longer than {MAX_LINE_CHARS:,} characters", "")
        elif not line.strip(" \t\r\n"):  # blank as JSON sees it: "\x1c" alone is an answered non-JSON line
            continue
        else:
            try:
                request = json.loads(line)
            except (ValueError, RecursionError) as exc:  # nesting too deep is RecursionError
                response = service.refuse(None, f"not JSON: {str(exc)[:200]}", "")
            else:
                response = service.handle(request)
        # ASCII: an escaped lone surrogate in an error cannot break the encoding of the reply.
        writer.write(json.dumps(response) + "\n")
        writer.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m soulgraph.hermes.memory_service",
                                     description="The soul graph behind Hermes' memory provider (JSON lines on stdio).")
    parser.add_argument("--soul-file", type=Path, help="default: $HERMES_HOME/soul.json, else ~/.hermes/soul.json")
    parser.add_argument("--no-embed", action="store_true",
                        help="recall with words and links only, even where the `embed` extra is installed")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the shim ends us by closing stdin (or SIGTERM)
    soul = SoulFile(args.soul_file or default_soul_file(), freeze=True, keep_image=True)  # one graph for the process's life
    try:
        soul.graph()  # refuse to start on a file we cannot read
    except SoulFileError as exc:
        print(f"soulgraph memory service: {exc}", file=sys.stderr)
        return 1
    soul.preload()  # the common words' masks, in the background, as the MCP server builds them (their sets freed)
    # Lines end at "\n" only: a "\r" is JSON whitespace, not the end of a request.
    stdin = open(sys.stdin.fileno(), "r", encoding="utf-8", errors="replace", newline="\n", closefd=False)
    stdout = open(sys.stdout.fileno(), "w", encoding="utf-8", closefd=False)
    service = MemoryService(soul, embed=not args.no_embed)
    try:
        serve(service, stdin, stdout)
    finally:
        service.vectors.save()  # the next start reads them instead of embedding again
    return 0


if __name__ == "__main__":
    sys.exit(main())
