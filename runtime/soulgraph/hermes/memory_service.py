"""`python -m soulgraph.hermes.memory_service --soul-file PATH`: the soul graph behind Hermes'
memory provider.

Hermes loads its memory provider into its own process, from its own venv, maybe on another
Python than ours. So the plugin Hermes loads (`soulgraph/hermes/plugin/`) is a shim written
against the standard library only: it starts this process from our release venv and speaks to
it over stdin/stdout, one JSON object per line each way:

    {"id": 7, "op": "recall", "args": {"query": "...", "budget": 1500}}
    {"id": 7, "ok": true, "result": {"text": "...", "ids": ["n12", ...]}}
    {"id": 8, "ok": false, "error": "unknown op 'recal'"}

Requests are answered in order. The graph lives here, in one `SoulFile` shared with the MCP
server under the store's lock (either one sees the other's writes before answering). Every
write goes through `memory.write.remember`, so the scanner applies as for any other write.

Ops: `hello`, `snapshot`, `recall`, `sync_turn`, `consolidate`, `memory_write`, `status`.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable, TextIO

from soulgraph import __version__
from soulgraph.engine.graph import ACTIVE, SoulGraph
from soulgraph.hermes import consolidate as consolidation, turns
from soulgraph.memory import lifecycle, ranking, snapshot
from soulgraph.memory.write import RefusedMemory, remember
from soulgraph.store import SoulFile, SoulFileError, default_soul_file
from soulgraph.store.vectors import VectorStore, vectors_path

RECALL_BUDGET = 1500  # characters of recalled memory injected before a turn
RECALL_LIMIT = 8
SNAPSHOT_CHARS = 2200
MIRROR_WRITER = "hermes:memory_tool"
# Hermes' built-in memory targets and how the seeder tags their entries (hermes/seed.py).
MIRROR_TARGETS = {"memory": ("memory", "note"), "user": ("user", "semantic_fact")}


class ServiceError(Exception):
    """A request this service refuses; the message says why."""


class MemoryService:
    def __init__(self, soul: SoulFile, *, embed: bool = True, vectors: VectorStore | None = None) -> None:
        self.soul = soul
        # Vectors for recall's questions (store/vectors.py); lexical until they are ready.
        self.vectors = vectors or VectorStore(vectors_path(soul.path), enabled=embed)
        self.ops: dict[str, Callable[..., Any]] = {
            "hello": self.hello, "snapshot": self.snapshot, "recall": self.recall, "sync_turn": self.sync_turn,
            "consolidate": self.consolidate, "memory_write": self.memory_write, "status": self.status,
        }

    def handle(self, request: Any) -> dict[str, Any]:
        """One request object to one response object; never raises."""
        request_id = request.get("id") if isinstance(request, dict) else None
        try:
            if not isinstance(request, dict):
                raise ServiceError("a request must be a JSON object")
            op = self.ops.get(request.get("op"))
            if op is None:
                raise ServiceError(f"unknown op {request.get('op')!r} (known: {', '.join(sorted(self.ops))})")
            args = request.get("args") or {}
            if not isinstance(args, dict):
                raise ServiceError("args must be a JSON object")
            return {"id": request_id, "ok": True, "result": op(**args)}
        except TypeError as exc:
            return {"id": request_id, "ok": False, "error": f"bad arguments: {exc}"}
        except (ServiceError, SoulFileError, RefusedMemory, ValueError) as exc:
            return {"id": request_id, "ok": False, "error": str(exc)}

    # ------------------------------------------------------------------ reads
    def hello(self) -> dict[str, Any]:
        return {"version": __version__, "soul_file": str(self.soul.path)}

    def graph(self) -> SoulGraph:
        return self.soul.graph()

    def snapshot(self, max_chars: int = SNAPSHOT_CHARS) -> dict[str, Any]:
        return {"text": snapshot.render(self.graph(), int(max_chars))}

    def recall(self, query: str, budget: int = RECALL_BUDGET, limit: int = RECALL_LIMIT,
               skip_session: str = "") -> dict[str, Any]:
        """`soul_related`'s ranking for the coming turn, as compact lines within `budget`
        characters; the current session's own turns are left out (they are in the context)."""
        graph = self.graph()
        skip = graph.tags.get(turns.session_tag(skip_session), set()) if skip_session else set()
        # Asked a little deeper to make up for the session's own turns left out, but never
        # deeper than twice the limit: a long session must not make every recall a deep one.
        depth = int(limit) + min(len(skip), int(limit)) + 2
        hits = [h for h in ranking.related(graph, query, depth, vectors=self.vectors)
                if h.node.id not in skip and h.node.privacy == "normal" and h.node.source != "hermes:session"]
        hits = hits[: int(limit)]
        lines, ids, used = [], [], 0
        for hit in hits:
            node = hit.node
            day = time.strftime("%Y-%m-%d", time.gmtime(node.created_at))
            body = " ".join(node.content.split())
            line = f"- [{day}, {node.kind}] {body}"
            if used + len(line) + 1 > budget:
                room = int(budget) - used - 1
                if room < 40:
                    break
                line = line[: room - 1] + "…"
            lines.append(line)
            ids.append(node.id)
            used += len(line) + 1
        return {"text": "\n".join(lines), "ids": ids}

    def status(self) -> dict[str, Any]:
        graph = self.graph()
        self.vectors.ready(graph)  # starts loading them, if not yet
        return {"soul_file": str(self.soul.path), "nodes": len(graph.nodes),
                "turns": len(graph.tags.get(turns.TURN_TAG, ())), "search": self.vectors.status()}

    # ------------------------------------------------------------------ writes
    def sync_turn(self, user: str = "", assistant: str = "", session_id: str = "", platform: str = "",
                  user_id: str = "", messages: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        if not (user or "").strip() and not (assistant or "").strip():
            return {"id": None, "skipped": "empty turn"}
        with self.soul.change() as graph:
            written = turns.record_turn(graph, user, assistant, session_id=session_id, platform=platform,
                                        user_id=user_id, messages=messages)
        return {"id": written.node.id, "redacted": list(written.redacted), "warnings": written.warnings}

    def consolidate(self, session_id: str = "", messages: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        with self.soul.change() as graph:
            result = consolidation.consolidate(graph, session_id, messages)
        return {"added": [{"kind": k, "id": i, "content": c} for k, i, c in result.added],
                "confirmed": [{"kind": k, "id": i} for k, i in result.confirmed],
                "refused": result.refused, "turns": result.turns, "summary": result.summary()}

    def memory_write(self, action: str, target: str = "memory", content: str = "",
                     metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        """Mirror Hermes' built-in memory tool: add adds, replace supersedes the entry holding
        `metadata.old_text`, remove archives it."""
        if target not in MIRROR_TARGETS:
            raise ServiceError(f"unknown memory target {target!r} (known: {', '.join(MIRROR_TARGETS)})")
        if action not in ("add", "replace", "remove"):
            raise ServiceError(f"unknown memory action {action!r} (known: add, replace, remove)")
        tag, kind = MIRROR_TARGETS[target]
        old_text = str((metadata or {}).get("old_text") or "")
        session = str((metadata or {}).get("session_id") or "") or None
        with self.soul.change() as graph:
            old = _entry_holding(graph, tag, old_text or content) if action != "add" else None
            if action == "remove":
                if old is None:
                    return {"archived": None, "note": "no mirrored entry holds that text"}
                lifecycle.archive(graph, old, writer=MIRROR_WRITER, reason="removed with Hermes' memory tool")
                return {"archived": old}
            if not content.strip():
                raise ServiceError(f"{action}: the entry's content is empty")
            written = remember(graph, content.strip(), [tag], writer=MIRROR_WRITER, kind=kind,
                               source=f"hermes:memory_tool:{target}", source_ref=session, where="memory_write")
            if old is not None:
                lifecycle.supersede(graph, old, written.node.id, writer=MIRROR_WRITER,
                                    reason="replaced with Hermes' memory tool")
        return {"id": written.node.id, "superseded": old, "warnings": written.warnings}


def _entry_holding(graph: SoulGraph, tag: str, text: str) -> str | None:
    """The active memory of `tag` whose content holds `text` (Hermes finds entries by a
    substring); the newest when several do."""
    needle = " ".join(text.split()).lower()
    if not needle:
        return None
    found = [graph.nodes[i] for i in graph.tags.get(tag, ()) if graph.nodes[i].status == ACTIVE
             and needle in " ".join(graph.nodes[i].content.split()).lower()]
    return max(found, key=lambda n: (n.created_at, n.id)).id if found else None


def serve(service: MemoryService, reader: TextIO, writer: TextIO) -> None:
    """Answer one request per line until the input ends."""
    for line in reader:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except ValueError as exc:
            response = {"id": None, "ok": False, "error": f"not JSON: {exc}"}
        else:
            response = service.handle(request)
        writer.write(json.dumps(response, ensure_ascii=False) + "\n")
        writer.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m soulgraph.hermes.memory_service",
                                     description="The soul graph behind Hermes' memory provider (JSON lines on stdio).")
    parser.add_argument("--soul-file", type=Path, help="default: $HERMES_HOME/soul.json, else ~/.hermes/soul.json")
    parser.add_argument("--no-embed", action="store_true",
                        help="recall with words and links only, even where the `embed` extra is installed")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the shim ends us by closing stdin (or SIGTERM)
    soul = SoulFile(args.soul_file or default_soul_file(), freeze=True)  # one graph for the process's life
    try:
        soul.graph()  # refuse to start on a file we cannot read
    except SoulFileError as exc:
        print(f"soulgraph memory service: {exc}", file=sys.stderr)
        return 1
    stdin = open(sys.stdin.fileno(), "r", encoding="utf-8", errors="replace", closefd=False)
    stdout = open(sys.stdout.fileno(), "w", encoding="utf-8", closefd=False)
    service = MemoryService(soul, embed=not args.no_embed)
    try:
        serve(service, stdin, stdout)
    finally:
        service.vectors.save()  # the next start reads them instead of embedding again
    return 0


if __name__ == "__main__":
    sys.exit(main())
