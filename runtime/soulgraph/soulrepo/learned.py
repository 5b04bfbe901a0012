"""The memories an agent learned, as a soul repository carries them: `memories/learned/*.jsonl`.

Learned memories are the ones written into the home's soul graph by the agent's own use: the
MCP tools (`soul_add`), consolidation of conversations into typed memories, the mirror of
Hermes' memory tool, the markdown toolset. What the home's files already carry (memories
seeded from SOUL.md, USER.md, MEMORY.md) and what came from a soul repository (imports) are
not learned here, and are exported by those files and that repository.

One JSON object a line, sorted by creation, one file per month of creation (`2026-12.jsonl`;
a month past PART_BYTES goes on in `2026-12.2.jsonl`, …, so each file stays well under the
validator's 2 MiB text limit). An export of an unchanged graph is the same files, a review reads
one memory per diff line (deleting a line rejects that memory), and a memory gone changes only
its own month's file:

    {"content": "...", "kind": "preference", "scope": "", "tags": ["..."],
     "confidence": 0.7, "importance": 0.5, "valid_from": null, "valid_to": null,
     "provenance": {"home": "<hostname>:<Hermes home>", "agent": "hermes", "id": "n12",
                    "source": "tool:soul_add", "source_ref": "s1#3", "writer": "tool:soul_add",
                    "created_at": "2026-05-01T10:00:00Z", "session": "s1", "turn": 3}}

A pin is not carried: an import writes learned memories unpinned (pinning an axiom on every
host is the operator's act, in SOUL.md). Left out, and counted by reason (`left_out`): conversation turns (episodic captures of what was
said: they stay on the host that heard them), flagged memories (read like prompt injection),
private ones, superseded / contradicted / archived ones, seeded and imported ones, and any
whose text the scanner finds a secret or injection in today.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from soulgraph.engine import record
from soulgraph.engine.graph import Node, SoulGraph
from soulgraph.memory import flagged, scopes
from soulgraph.memory.scanner import scan

LAYER = "learned"
FOLDER = "memories/learned"
GLOB = "memories/learned/*.jsonl"
PART_BYTES = 1 << 20  # one file's most, under validate's TEXT_LIMIT (2 MiB) with room to spare
TAG = "learned"  # on every learned memory an import writes
MAX_LINE_CHARS = 64 << 10  # a memory is text of a page or two, not a file dump

# Why a memory of the graph is not in the export: the report's short reason, and what it means.
TURN, FLAGGED, PRIVATE, SEEDED, IMPORTED = "conversation turns", "flagged", "private", "seeded", "imported"
SECRET, INJECTION, TOO_LONG = "secret", "prompt injection", "too long"
REASONS = {
    TURN: "episodic captures of what was said: they stay on the host that heard them",
    FLAGGED: "read like prompt injection: withheld from every prompt, never exported",
    PRIVATE: "marked private",
    "superseded": "replaced by a newer memory",
    "contradicted": "contradicted by another memory",
    "archived": "taken out of recall",
    SEEDED: "from the home's SOUL.md, USER.md and MEMORY.md, which the export carries as files",
    IMPORTED: "came from a soul repository, which carries them",
    SECRET: "the scanner finds a secret in it today",
    INJECTION: "the scanner finds prompt injection in it today",
    TOO_LONG: f"more than {MAX_LINE_CHARS >> 10} KiB as a line: a learned memory is text, not data",
}
TURN_SOURCES = ("hermes:sync_turn", "hermes:session")
TURN_TAG = "turn"


def home_identity(home: Path) -> str:
    """Which home a memory was learned in: this machine's name and the home's path. An import
    that meets a memory learned in its own home knows it (and adds nothing)."""
    return f"{socket.gethostname()}:{home.resolve()}"


def _iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def why_left_out(node: Node, flagged_lines: dict[str, tuple[str, tuple[str, ...]]]) -> str | None:
    """The reason `node` stays out of the export, or None when it is a learned memory to carry."""
    if node.source in TURN_SOURCES or TURN_TAG in node.tags:
        return TURN
    if record.flagged(node.metadata) or (flagged_lines and flagged.holder(node.content, flagged_lines)):
        return FLAGGED
    if node.privacy != record.DEFAULT_PRIVACY:
        return PRIVATE
    if node.status != record.DEFAULT_STATUS:
        return node.status  # superseded, contradicted, archived
    if node.writer == "seed" or node.source.startswith("seed:"):
        return SEEDED
    if node.writer == "import" or node.source.startswith("import:") or "import" in node.metadata:
        return IMPORTED
    found = scan("\n".join([node.content, *node.tags]))
    if found.secrets:
        return SECRET
    if found.injections:
        return INJECTION
    return None


def line_of(node: Node, agent: str, home: str) -> dict[str, Any]:
    ref = node.source_ref or None
    session, _, turn = (ref or "").partition("#")
    provenance = {"home": home, "agent": agent, "id": node.id, "source": node.source or None,
                  "source_ref": ref, "writer": node.writer, "created_at": _iso(node.created_at),
                  "session": session or None, "turn": int(turn) if turn.isdigit() else None}
    return {"content": node.content, "kind": node.kind, "scope": node.scope, "tags": list(node.tags),
            "confidence": node.confidence, "importance": node.importance,
            "valid_from": node.valid_from, "valid_to": node.valid_to, "provenance": provenance}


@dataclass
class Selection:
    lines: list[dict[str, Any]] = field(default_factory=list)
    left_out: dict[str, list[str]] = field(default_factory=dict)  # reason -> node ids

    def files(self) -> dict[str, str]:
        """{file name under FOLDER: its text}: a file per month of creation, in parts past PART_BYTES."""
        months: dict[str, list[str]] = {}
        for line in self.lines:
            month = (line["provenance"].get("created_at") or "undated")[:7]
            months.setdefault(month, []).append(_dumped(line))
        found: dict[str, str] = {}
        for month, texts in months.items():
            part, size, chunk = 1, 0, []
            for text in texts:
                if chunk and size + len(text.encode()) > PART_BYTES:
                    found[_part_name(month, part)] = "".join(chunk)
                    part, size, chunk = part + 1, 0, []
                chunk.append(text)
                size += len(text.encode())
            found[_part_name(month, part)] = "".join(chunk)
        return found


def _dumped(line: dict[str, Any]) -> str:
    return json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n"


def _part_name(month: str, part: int) -> str:
    return f"{month}.jsonl" if part == 1 else f"{month}.{part}.jsonl"


def select(graph: SoulGraph, agent: str, home: str,
           flagged_lines: dict[str, tuple[str, tuple[str, ...]]] | None = None) -> Selection:
    """The learned memories of `graph` to export, and the others by reason."""
    chosen = Selection()
    for node in sorted(graph.nodes.values(), key=lambda n: (n.created_at, n.id)):
        reason = why_left_out(node, flagged_lines or {})
        line = line_of(node, agent, home) if reason is None else None
        if line is not None and len(_dumped(line)) > MAX_LINE_CHARS:
            reason = TOO_LONG
        if reason is None:
            chosen.lines.append(line)
        else:
            chosen.left_out.setdefault(reason, []).append(node.id)
    return chosen


# ---------------------------------------------------------------------------- reading it back
@dataclass(frozen=True)
class Learned:
    """One line of a learned file, checked."""

    path: str
    number: int  # line number, from 1
    content: str
    kind: str
    scope: str
    tags: tuple[str, ...]
    confidence: float
    importance: float
    valid_from: float | None
    valid_to: float | None
    provenance: dict[str, Any]


def parse(text: str, path: str) -> tuple[list[Learned], list[str]]:
    """The memories of a learned file, and its problems ("line N: ..."), each one named."""
    found: list[Learned] = []
    problems: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            found.append(_checked(raw, path, number))
        except ValueError as exc:
            problems.append(f"line {number}: {exc}")
    return found, problems


def _checked(raw: str, path: str, number: int) -> Learned:
    if len(raw) > MAX_LINE_CHARS:
        raise ValueError(f"longer than {MAX_LINE_CHARS >> 10} KiB; a learned memory is text, not data")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    content = data.get("content")
    if not isinstance(content, str) or not content.strip():
        raise ValueError("content must be a non-empty string")
    kind = data.get("kind", record.DEFAULT_KIND)
    if kind not in record.KINDS:
        raise ValueError(f"kind {kind!r:.40} is not one of {', '.join(record.KINDS)}")
    scope = data.get("scope", scopes.SHARED)
    try:
        scopes.check(scope)
    except scopes.ScopeError as exc:
        raise ValueError(str(exc)) from None
    tags = data.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) and t.strip() for t in tags):
        raise ValueError("tags must be a list of non-empty strings")
    numbers = {}
    for name, default in (("confidence", record.DEFAULT_CONFIDENCE), ("importance", record.DEFAULT_IMPORTANCE),
                          ("valid_from", None), ("valid_to", None)):
        try:
            numbers[name] = record.checked(name, data.get(name, default), "memory")
        except ValueError as exc:
            raise ValueError(str(exc).removeprefix("memory: ")) from None
    provenance = data.get("provenance", {})
    if not isinstance(provenance, dict) or not all(
            isinstance(v, (str, int, float, type(None))) and not isinstance(v, bool) for v in provenance.values()):
        raise ValueError("provenance must be an object of strings and numbers")
    return Learned(path, number, content.strip(), kind, scope, tuple(dict.fromkeys(t.strip() for t in tags)),
                   numbers["confidence"], numbers["importance"], numbers["valid_from"], numbers["valid_to"],
                   dict(provenance))


def problems(root: Path, files: Iterable[str]) -> list[tuple[str, str]]:
    """(path, problem) of every bad line of the learned files, for `validate`."""
    found = []
    for relative in files:
        try:
            text = (root / relative).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            found.append((relative, f"layered_imports.{LAYER}: cannot be read as UTF-8 text ({exc})"))
            continue
        found += [(relative, f"layered_imports.{LAYER}: {problem}") for problem in parse(text, relative)[1]]
    return found
