"""The memories web page: a Starlette app over soulgraph.memories, and the server that runs it.

Who may use it: whoever holds the token printed with the URL (`?token=` once; the page then
keeps an HttpOnly, SameSite=Strict session cookie). Every other request is refused 403, and so
is a request whose Host header is not the address served (a DNS-rebinding page names its own
host). A POST also needs the session's CSRF token in `X-CSRF-Token`, a JSON body, and an
Origin (when the browser sends one) of the page itself. Changes are refused unless the server
was started with `allow_edits`; each one is a call of soulgraph.memories.changes, so it is one
change of the store under the writers' lock, with its audit entry, as from the CLI.

Reads follow the journal (`SoulFile.graph()` at every request), so what the gateway and its
servers write while the page is open is there at the next request. Requests are served one at
a time (the graph in memory is this process's own, and a change rewrites it in place).

    GET  /                          the page (static/index.html)
    GET  /static/...                its files, from static/ only
    GET  /api/session               the CSRF token, whether edits are allowed, the soul file
    GET  /api/search                q (empty: the list), kind, scope, tag, status, all, since,
                                    until, pinned, flagged, as, order, limit, show_flagged
    GET  /api/memory/ID             shown.detail (show_flagged)
    GET  /api/graph/ID              depth (1..6): parents and children as nodes and edges
    GET  /api/timeline              memories per day, by kind and by scope (the search filters)
    GET  /api/pinned                the pinned memories and the frozen snapshot's text now (as)
    GET  /api/health                soulgraph.store's check, last compaction, last backup
    GET  /api/history               the latest audit entries
    POST /api/memory/ID/ACTION      edit, pin, unpin, archive, unarchive, forget (JSON body)
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import secrets
import socket
import sys
import time
from collections import OrderedDict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Awaitable, Callable

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from soulgraph.engine import record
from soulgraph.engine.graph import SoulGraph, SoulGraphError, UnknownNode
from soulgraph.memories import changes, reading, shown
from soulgraph.memories.reading import Filters
from soulgraph.memories.target import MemoriesError, Target
from soulgraph.memory import filters as time_filters
from soulgraph.memory import scopes, snapshot
from soulgraph.memory.guard import RefusedMemory
from soulgraph.store import SoulFileError

STATIC = Path(__file__).resolve().parent / "static"
COOKIE = "soulgraph_memories_{port}"  # cookies are not kept apart by port: the name is
MAX_SESSIONS = 64
MAX_DEPTH = 6
MAX_GRAPH_NODES = 400
MAX_LIMIT = 500
MAX_BODY = 1 << 20
DAY = 86400.0
LOOPBACK_NAMES = ("127.0.0.1", "localhost")
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
ACTIONS = ("edit", "supersede", "pin", "unpin", "archive", "unarchive", "forget")


class Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers={"Cache-Control": "no-store"})


class Guard:
    """Token, Host, CSRF and Origin checks in front of the whole app (static files included)."""

    def __init__(self, app: ASGIApp, *, token: str, hosts: frozenset[str], port: int):
        self.app, self.token, self.hosts = app, token, hosts
        self.cookie = COOKIE.format(port=port)
        self.sessions: OrderedDict[str, str] = OrderedDict()  # session id -> its CSRF token

    def _session(self, request: Request) -> str | None:
        sid = request.cookies.get(self.cookie)
        if sid and sid in self.sessions:
            return sid
        return None

    def new_session(self) -> tuple[str, str]:
        sid, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        self.sessions[sid] = csrf
        while len(self.sessions) > MAX_SESSIONS:
            self.sessions.popitem(last=False)
        return sid, csrf

    def _set_cookie(self, response: Response, sid: str) -> None:
        response.set_cookie(self.cookie, sid, httponly=True, samesite="strict", path="/")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        host = request.headers.get("host", "")
        if host.lower() not in self.hosts:
            await _error(403, "this server answers to its own address only (Host header refused)")(scope, receive, send)
            return
        sid = self._session(request)
        given = request.query_params.get("token")
        fresh = None
        if sid is None:
            if not (given and secrets.compare_digest(given.encode(), self.token.encode())):
                await _error(403, "no valid token: open the URL the server printed")(scope, receive, send)
                return
            if request.method != "GET":
                await _error(403, "a change needs the page's session (open the printed URL first)")(
                    scope, receive, send)
                return
            fresh = self.new_session()
            sid = fresh[0]
            if request.url.path == "/":
                # The token leaves the address bar (and the history) at once.
                response = RedirectResponse("/", status_code=303, headers={"Cache-Control": "no-store"})
                self._set_cookie(response, sid)
                await response(scope, receive, send)
                return
        if request.method not in ("GET", "HEAD"):
            problem = self._post_problem(request, sid)
            if problem:
                await _error(403, problem)(scope, receive, send)
                return
        scope.setdefault("state", {})["session"] = sid
        scope["state"]["csrf"] = self.sessions[sid]

        async def send_with_cookie(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"),
                            (b"x-frame-options", b"DENY"), (b"content-security-policy", CSP.encode()),
                            (b"cross-origin-opener-policy", b"same-origin"),
                            (b"cross-origin-resource-policy", b"same-origin")]
                if fresh is not None:
                    cookie = Response()
                    self._set_cookie(cookie, fresh[0])
                    headers += [h for h in cookie.raw_headers if h[0] == b"set-cookie"]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_cookie)

    def _post_problem(self, request: Request, sid: str) -> str | None:
        origin = request.headers.get("origin")
        if origin is not None and origin.lower() not in {f"http://{h}" for h in self.hosts}:
            return f"cross-site request refused (Origin {origin[:100]})"
        site = request.headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return f"cross-site request refused (Sec-Fetch-Site {site[:40]})"
        csrf = request.headers.get("x-csrf-token", "")
        if not secrets.compare_digest(csrf.encode(), self.sessions[sid].encode()):
            return "missing or wrong CSRF token (reload the page)"
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            return "a change is sent as application/json"
        return None


def _flag(value: str | None) -> bool | None:
    if value is None or value == "":
        return None
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise Refused(400, f"{value!r:.40} is not true or false")


def _int(value: str | None, default: int, low: int, high: int, name: str) -> int:
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise Refused(400, f"{name} must be a whole number, not {value!r:.40}") from None
    return max(low, min(high, number))


def _time(value: str | None, name: str) -> float | None:
    if not value:
        return None
    try:
        return time_filters.parse_time(value, name)
    except ValueError as exc:
        raise Refused(400, str(exc)) from None


def _scope(value: str) -> str:
    try:
        return scopes.parse(value)
    except scopes.ScopeError as exc:
        raise Refused(400, str(exc)) from None


def filters_of(request: Request) -> Filters:
    """The CLI's list and search filters (`--kind` … `--flagged`) from the query string."""
    q = request.query_params
    kinds = tuple(q.getlist("kind"))
    for kind in kinds:
        if kind not in record.KINDS:
            raise Refused(400, f"kind {kind!r:.40} is not one of {', '.join(record.KINDS)}")
    statuses = tuple(q.getlist("status"))
    for status in statuses:
        if status not in record.STATUSES:
            raise Refused(400, f"status {status!r:.40} is not one of {', '.join(record.STATUSES)}")
    return Filters(kinds=kinds, scopes=tuple(_scope(s) for s in q.getlist("scope")), tags=tuple(q.getlist("tag")),
                   statuses=statuses, any_status=bool(_flag(q.get("all"))), since=_time(q.get("since"), "since"),
                   until=_time(q.get("until"), "until"), pinned=_flag(q.get("pinned")),
                   flagged=True if _flag(q.get("flagged")) else None)


class Memories:
    """The endpoints, over one target (its SoulFile follows the journal)."""

    def __init__(self, target: Target, *, allow_edits: bool = False, vectors: bool = True):
        self.target = target
        self.allow_edits = allow_edits
        self.use_vectors = vectors
        self._vectors: Any = None
        self._vectors_looked = False
        self._listings: OrderedDict[tuple[Any, ...], tuple[list[str], int]] = OrderedDict()
        self._timeline: tuple[Any, dict[str, Any]] | None = None
        self.lock = asyncio.Lock()

    # ------------------------------------------------------------------ helpers
    def graph(self) -> SoulGraph:
        return self.target.soul.graph()

    def state(self, graph: SoulGraph) -> tuple[int, int, int]:
        """Changes whenever the soul does: a record applied from the journal (ours or another
        process's), a snapshot read again, a node or link changed."""
        return (id(graph), self.target.soul.seq, graph.generation)

    def listing(self, graph: SoulGraph, filters: Filters, *, limit: int | None, order: str,
                as_scope: str | None = None) -> tuple[list[Any], int]:
        """reading.listing (only what `as_scope`'s server sees, if given), its answer (ids and
        total) kept while the soul stays as it was: a list of every memory sorts them all (a
        third of a second at 100,000), and the page asks for the same list at every visit."""
        key = (self.state(graph), filters, limit, order, as_scope)  # (Filters' hash leaves `extra` out)
        found = self._listings.get(key)
        if found is None or any(node_id not in graph.nodes for node_id in found[0]):
            if as_scope is not None:
                filters = Filters(**{**filters.__dict__, "extra": (*filters.extra, scopes.Reader(as_scope).sees)})
            nodes, total = reading.listing(graph, filters, limit=limit, order=order)
            found = ([n.id for n in nodes], total)
            self._listings[key] = found
            while len(self._listings) > 16:
                self._listings.popitem(last=False)
        return [graph.nodes[node_id] for node_id in found[0]], found[1]

    def vectors(self) -> Any:
        """The soul's vectors when their file is there (as the CLI's search loads them)."""
        if not self.use_vectors:
            return None
        if not self._vectors_looked:
            self._vectors_looked = True
            try:
                from soulgraph.store.vectors import VectorStore, vectors_path
                path = vectors_path(self.target.soul.path)
                self._vectors = VectorStore(path, background=False) if path.exists() else None
            except ImportError:  # no numpy: words only
                self._vectors = None
        return self._vectors

    def endpoint(self, work: Callable[[Request], dict[str, Any]]) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            async with self.lock:  # one at a time: a change rewrites the graph in place
                try:
                    answer = work(request)
                except Refused as exc:
                    return _error(exc.status, str(exc))
                except UnknownNode as exc:
                    return _error(404, f"no memory {exc}")
                except (MemoriesError, SoulGraphError, RefusedMemory, scopes.ScopeError) as exc:
                    return _error(409, str(exc))
                except SoulFileError as exc:
                    return _error(500, str(exc))
            return JSONResponse(answer, headers={"Cache-Control": "no-store"})
        return run

    # ------------------------------------------------------------------ reads
    def session(self, request: Request) -> dict[str, Any]:
        return {"csrf": request.state.csrf, "allow_edits": self.allow_edits,
                "soul_file": str(self.target.soul.path), "kinds": list(record.KINDS),
                "statuses": list(record.STATUSES), "orders": list(reading.ORDERS),
                "scopes": [scopes.label(s) for s in [scopes.SHARED, *sorted(self.graph().scopes)]]}

    def search(self, request: Request) -> dict[str, Any]:
        q = request.query_params
        graph = self.graph()
        show_flagged = bool(_flag(q.get("show_flagged")))
        filters = filters_of(request)
        query = (q.get("q") or "").strip()
        as_scope = _scope(q["as"]) if q.get("as") else None
        if query:
            limit = _int(q.get("limit"), 10, 1, MAX_LIMIT, "limit")
            vectors = self.vectors()
            hits = reading.search(graph, query, filters, limit=limit, as_scope=as_scope, vectors=vectors)
            items = [shown.brief(graph, h.node, show_flagged=show_flagged, score=round(h.score, 4), via=h.via)
                     for h in hits]
            used = bool(vectors is not None and vectors.state != "lexical")
            return {"query": query, "vectors": used, "results": items, "total": len(items)}
        order = q.get("order") or "newest"
        if order not in reading.ORDERS:
            raise Refused(400, f"order must be one of {', '.join(reading.ORDERS)}")
        limit = _int(q.get("limit"), 50, 1, MAX_LIMIT, "limit")
        nodes, total = self.listing(graph, filters, limit=limit, order=order, as_scope=as_scope)
        return {"query": "", "results": [shown.brief(graph, n, show_flagged=show_flagged) for n in nodes],
                "total": total}

    def memory(self, request: Request) -> dict[str, Any]:
        graph = self.graph()
        node = reading.get(graph, request.path_params["node_id"])
        return shown.detail(graph, node, show_flagged=bool(_flag(request.query_params.get("show_flagged"))))

    def around(self, request: Request) -> dict[str, Any]:
        """The DAG around a memory: its parents' side and its children's, `depth` steps each
        way (supersedes links too), as nodes (with their step: below 0 a parent's side) and
        edges parent -> child."""
        graph = self.graph()
        start = reading.get(graph, request.path_params["node_id"]).id
        depth = _int(request.query_params.get("depth"), 1, 1, MAX_DEPTH, "depth")
        show_flagged = bool(_flag(request.query_params.get("show_flagged")))
        step: dict[str, int] = {start: 0}
        edges: set[tuple[str, str, str]] = set()
        cut = False
        replaced: dict[str, list[str]] | None = None  # new id -> the ids it superseded, made once if needed

        def superseded(node_id: str) -> list[str]:
            nonlocal replaced
            if replaced is None:
                replaced = {}
                for other in graph.nodes.values():
                    if other.superseded_by:
                        replaced.setdefault(other.superseded_by, []).append(other.id)
            return replaced.get(node_id, [])

        def known(node_id: str) -> bool:
            return node_id in graph.nodes or node_id in graph.branch

        for direction in (-1, 1):
            frontier = [start]
            for level in range(1, depth + 1):
                following: list[str] = []
                for node_id in frontier:
                    if direction < 0:
                        ups = set(graph.parents.get(node_id, ())) | set(graph.branch_parents.get(node_id, ()))
                        linked = [(p, node_id, "parent") for p in ups]
                        linked += [(old, node_id, "supersedes") for old in superseded(node_id)]
                    else:
                        linked = [(node_id, c, "parent") for c in graph.children.get(node_id, ())]
                        node = graph.nodes.get(node_id)
                        if node is not None and node.superseded_by:
                            linked.append((node_id, node.superseded_by, "supersedes"))
                    for a, b, how in sorted(linked):
                        other = a if direction < 0 else b
                        if not known(other):
                            continue
                        if other not in step:
                            if len(step) >= MAX_GRAPH_NODES:
                                cut = True
                                continue
                            step[other] = direction * level
                            following.append(other)
                        edges.add((a, b, how))
                frontier = following
        nodes = []
        for node_id, at in step.items():
            node = graph.nodes.get(node_id) or graph.branch[node_id]
            nodes.append(shown.brief(graph, node, show_flagged=show_flagged, step=at,
                                     parents=len(graph.parents.get(node_id, ())),
                                     children=len(graph.children.get(node_id, ()))))
        nodes.sort(key=lambda n: (n["step"], n["id"]))
        return {"center": start, "depth": depth, "nodes": nodes, "cut": cut,
                "edges": [{"from": a, "to": b, "kind": how} for a, b, how in sorted(edges)
                          if a in step and b in step]}

    def timeline(self, request: Request) -> dict[str, Any]:
        """How many memories were learned each day (UTC), by kind and by scope."""
        graph = self.graph()
        filters = filters_of(request)
        key = (self.state(graph), filters)
        if self._timeline is not None and self._timeline[0] == key:
            return self._timeline[1]
        nodes, total = reading.listing(graph, filters, limit=None, order="oldest")
        days: dict[str, dict[str, Any]] = {}
        for node in nodes:
            day = datetime.fromtimestamp(node.created_at, timezone.utc).strftime("%Y-%m-%d")
            entry = days.get(day)
            if entry is None:
                entry = days[day] = {"day": day, "total": 0, "kinds": {}, "scopes": {}}
            entry["total"] += 1
            entry["kinds"][node.kind] = entry["kinds"].get(node.kind, 0) + 1
            label = scopes.label(node.scope)
            entry["scopes"][label] = entry["scopes"].get(label, 0) + 1
        answer = {"total": total, "days": list(days.values())}
        self._timeline = (key, answer)  # the last one, while the soul stays as it was
        return answer

    def pinned(self, request: Request) -> dict[str, Any]:
        graph = self.graph()
        q = request.query_params
        show_flagged = bool(_flag(q.get("show_flagged")))
        as_scope = _scope(q["as"]) if q.get("as") else None
        where = scopes.Reader(as_scope).where(graph) if as_scope is not None else None
        pins = sorted((graph.nodes[i] for i in graph.pinned if i in graph.nodes), key=lambda n: (n.created_at, n.id))
        if where is not None:
            pins = [n for n in pins if where(n)]
        text = snapshot.render(graph, snapshot.DEFAULT_MAX_CHARS, where=where)
        return {"pinned": [shown.brief(graph, n, show_flagged=show_flagged) for n in pins],
                "snapshot": text, "snapshot_chars": len(text), "max_chars": snapshot.DEFAULT_MAX_CHARS,
                "as": scopes.label(as_scope) if as_scope is not None else None}

    async def health_endpoint(self, request: Request) -> Response:
        """The store's own check reads the files afresh (seconds at 100,000 memories): in a
        thread, outside the lock, so the page's other requests go on meanwhile."""
        from soulgraph.store.__main__ import check

        checked = await anyio.to_thread.run_sync(check, self.target.soul.path)
        return await self.endpoint(lambda r: self.health(r, checked))(request)

    def health(self, request: Request, report: dict[str, Any]) -> dict[str, Any]:
        soul = self.target.soul
        report["last_compaction"] = _mtime(soul.path)
        report["journal_modified"] = _mtime(soul.journal_path)
        backups = sorted(((p.stat().st_mtime, p) for p in _backups(soul.path)), reverse=True)
        report["last_backup"] = ({"path": str(backups[0][1]), "at": shown.iso(backups[0][0])} if backups else None)
        report["backup_note"] = ("the copies kept beside the soul file (hermes backup's, a schema upgrade's); "
                                 "fleet backup keeps its copies on the operator")
        graph = self.graph()
        last = graph.audit[-1] if graph.audit else None
        report["last_change"] = shown.entry_shown(graph, last) if last else None
        report["edits_allowed"] = self.allow_edits
        return report

    def history(self, request: Request) -> dict[str, Any]:
        graph = self.graph()
        limit = _int(request.query_params.get("limit"), 50, 1, MAX_LIMIT, "limit")
        show_flagged = bool(_flag(request.query_params.get("show_flagged")))
        return {"entries": [shown.entry_shown(graph, e, show_flagged) for e in reading.history(graph, limit=limit)]}

    # ------------------------------------------------------------------ changes
    def change(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        if not self.allow_edits:
            raise Refused(403, "read-only: start the server with --allow-edits to change memories")
        node_id, action = request.path_params["node_id"], request.path_params["action"]
        reason = body.get("reason") or ""
        if not isinstance(reason, str):
            raise Refused(400, "reason must be text")
        if action == "edit":
            content, kind, tags = body.get("content"), body.get("kind"), body.get("tags")
            if content is not None and not isinstance(content, str):
                raise Refused(400, "content must be text")
            if kind is not None and kind not in record.KINDS:
                raise Refused(400, f"kind must be one of {', '.join(record.KINDS)}")
            if tags is not None and not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
                raise Refused(400, "tags must be a list of text")
            return changes.edit(self.target, node_id, content=content, kind=kind,
                                tags=None if tags is None else [t.strip() for t in tags if t.strip()], reason=reason)
        if action == "supersede":
            by = body.get("by")
            if not isinstance(by, str) or not by.strip():
                raise Refused(400, "supersede needs by: the id of the memory that replaces this one")
            return changes.supersede(self.target, node_id, by.strip(), reason=reason)
        if action in ("pin", "unpin"):
            return changes.pin(self.target, node_id, action == "pin", reason=reason)
        if action in ("archive", "unarchive"):
            return getattr(changes, action)(self.target, node_id, reason=reason)
        if action == "forget":
            return changes.forget(self.target, node_id, reason=reason, hard=body.get("hard") is True)
        raise Refused(404, f"no action {action!r:.40} (one of {', '.join(ACTIONS)})")

    async def post(self, request: Request) -> Response:
        raw = await request.body()
        if len(raw) > MAX_BODY:
            return _error(413, "the request is too big")
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return _error(400, "the body is not JSON")
        if not isinstance(body, dict):
            return _error(400, "the body must be a JSON object")
        return await self.endpoint(lambda r: self.change(r, body))(request)


def _mtime(path: Path) -> str | None:
    try:
        return shown.iso(path.stat().st_mtime)
    except OSError:
        return None


def _backups(soul_path: Path) -> list[Path]:
    stem = soul_path.name.removesuffix(".json") or soul_path.name
    found = [soul_path.with_name(f"{stem}-hermes-backup.json"), *soul_path.parent.glob(f"{soul_path.name}*.bak-schema*")]
    return [p for p in found if p.is_file()]


def make_app(target: Target, *, token: str, port: int, allow_edits: bool = False,
             hosts: tuple[str, ...] = LOOPBACK_NAMES, vectors: bool = True,
             tunnel_port: int | None = None) -> ASGIApp:
    """The page and its API behind the guard; `hosts`: the names the Host header may give (at
    `port`, and at `tunnel_port`: the local end of an SSH tunnel to this server)."""
    memories = Memories(target, allow_edits=allow_edits, vectors=vectors)

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})

    async def not_found(request: Request) -> Response:
        return _error(404, "no such endpoint")

    routes = [
        Route("/", index),
        Route("/api/session", memories.endpoint(memories.session)),
        Route("/api/search", memories.endpoint(memories.search)),
        Route("/api/memory/{node_id}", memories.endpoint(memories.memory)),
        Route("/api/memory/{node_id}/{action}", memories.post, methods=["POST"]),
        Route("/api/graph/{node_id}", memories.endpoint(memories.around)),
        Route("/api/timeline", memories.endpoint(memories.timeline)),
        Route("/api/pinned", memories.endpoint(memories.pinned)),
        Route("/api/health", memories.health_endpoint),
        Route("/api/history", memories.endpoint(memories.history)),
        Route("/api/{rest:path}", not_found),
        Mount("/static", app=StaticFiles(directory=STATIC, follow_symlink=False), name="static"),
    ]
    app = Starlette(routes=routes)
    app.state.memories = memories
    ports = (port,) if tunnel_port is None else (port, tunnel_port)
    allowed = frozenset(f"{h.lower()}:{p}" for h in hosts for p in ports)
    guard = Guard(app, token=token, hosts=allowed, port=port)
    guard.memories = memories
    return guard


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"


def serve(target: Target, *, port: int = 0, bind: str | None = None, allow_edits: bool = False,
          out=None, ready: Callable[[str], None] | None = None, tunnel_port: int | None = None) -> int:
    """Bind (127.0.0.1 unless `bind`), print the URL with its token, serve until Ctrl-C."""
    import uvicorn

    out = out or sys.stdout
    address = bind or "127.0.0.1"
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Each accepted connection inherits it: a response's head and body are sent apart, and with
    # Nagle on the body would wait for the client's delayed ACK (40 ms a request).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((address, port))
    except OSError as exc:
        sock.close()
        raise MemoriesError(f"cannot listen on {address}:{port}: {exc.strerror or exc}") from None
    sock.listen(64)
    port = sock.getsockname()[1]
    hosts = list(LOOPBACK_NAMES)
    shown_host = "127.0.0.1"
    if bind is not None and not _is_loopback(address):
        print(f"warning: serving on {address}, reachable from other machines; anyone who learns the token "
              "can read this soul" + (" and change it" if allow_edits else ""), file=sys.stderr)
    if bind is not None:
        wildcard = address in ("0.0.0.0", "::")
        named = [socket.gethostname(), socket.getfqdn()] if wildcard else []
        hosts += [f"[{address}]" if ":" in address else address, *named]
        if not wildcard:
            shown_host = f"[{address}]" if ":" in address else address
    token = secrets.token_urlsafe(24)
    app = make_app(target, token=token, port=port, allow_edits=allow_edits, hosts=tuple(hosts),
                   tunnel_port=tunnel_port)
    try:
        # Read now: a soul that does not load says so here, and the first page is quick.
        app.memories.listing(target.soul.graph(), Filters(), limit=50, order="newest")
    except SoulFileError as exc:
        sock.close()
        raise MemoriesError(str(exc)) from None
    url = f"http://{shown_host}:{port}/?token={token}"
    mode = "edits allowed" if allow_edits else "read-only"
    print(f"serving {target.soul.path} ({mode}) at\n    {url}\nCtrl-C stops it.", file=out, flush=True)
    if ready is not None:
        ready(url)
    config = uvicorn.Config(app, log_level="warning", access_log=False, server_header=False, proxy_headers=False,
                            lifespan="off", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[sock])
    sock.close()
    return 0


def main(args: Any) -> int:
    """`serve`'s dispatch from soulgraph.memories.__main__."""
    from soulgraph.memories.target import open_target

    prog = "python -m soulgraph.memories serve"
    try:
        target = open_target(args.hermes_home, args.soul_file)
        return serve(target, port=args.port, bind=args.bind, allow_edits=args.allow_edits,
                     tunnel_port=getattr(args, "tunnel_port", None))
    except MemoriesError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1
