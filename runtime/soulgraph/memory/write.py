"""The one way a memory gets into a soul graph: stamped with its provenance, added, and
vetted on the way by the write guard (memory/guard.py).

Every write path calls `remember` inside its `SoulFile.change()` block (the store then makes
the change durable or takes it back): the MCP tools, seeding from a Hermes home, soul-repo
imports, turn capture, consolidation and the Hermes memory provider.

The guard scans every string of the memory — content, tags, kind, source, source_ref,
writer, scope and every key and value in its metadata:

- A secret (a private key, a cloud key, a provider token, a `password=` assignment, …) in
  any of them is refused before anything changes: `RefusedMemory` names the field and the
  rule, never the secret, and no byte of it reaches the graph, the journal or a backup.
- Prompt-injection phrasing (instructions to ignore earlier instructions, fake system
  headers, invisible characters, exfiltration URLs) in any of them is stored, but flagged:
  `privacy` private, the rules in `metadata["flagged"]`, never pinned (a pin asked for is
  dropped), with a warning for the caller naming the fields; a flagged memory is withheld
  from prompts.
- Provenance: `writer` is the write path (`tool:soul_add`, `seed`, …), stamped here;
  `source` is where the memory came from as its writer says, else the write path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from soulgraph.engine import record
from soulgraph.engine.graph import Node, SoulGraph, UnknownNode
from soulgraph.memory import guard
from soulgraph.memory.guard import RefusedMemory

FLAGGED = record.FLAGGED  # metadata key: the scanner rules an injection-marked memory matched
__all__ = ["FLAGGED", "RefusedMemory", "Written", "explore", "redact_secrets", "remember"]


@dataclass
class Written:
    """What `remember` stored, and what the caller should tell whoever asked."""

    node: Node
    warnings: list[str] = field(default_factory=list)


def redact_secrets(text: str) -> tuple[str, tuple[str, ...]]:
    """`text` with every secret the scanner finds replaced by ``[secret removed: <rule>]``,
    and the rules that fired. For writers that keep the rest of a text rather than refuse it
    all (a conversation turn in which the user pasted a key)."""
    found = guard.scan(text).secrets
    if not found:
        return text, ()
    parts, end = [], 0
    for finding in sorted(found, key=lambda f: f.start):
        if finding.start < end:  # overlapping matches: the first one's cut covers it
            end = max(end, finding.end)
            continue
        parts += [text[end:finding.start], f"[secret removed: {finding.rule}]"]
        end = finding.end
    parts.append(text[end:])
    return "".join(parts), tuple(sorted({f.rule for f in found}))


def remember(graph: SoulGraph, content: str, tags: Iterable[str] = (), *, writer: str,
             parents: Iterable[str] = (), pinned: bool = False, kind: str | None = None,
             source: str = "", source_ref: str | None = None,
             confidence: float = record.DEFAULT_CONFIDENCE, importance: float = record.DEFAULT_IMPORTANCE,
             metadata: dict[str, Any] | None = None, where: str = "memory",
             node_id: str | None = None, created_at: float | None = None,
             scope: str = record.DEFAULT_SCOPE) -> Written:
    """Stamp and add one memory to `graph` (call inside `SoulFile.change()`); the guard vets it.
    `scope`: whose memory it is (memory/scopes.py); it may be built only on memories its
    writer sees (shared ones and its own scope's): another user's is an unknown id."""
    tags = list(tags)
    parents = _visible_parents(graph, parents, scope)
    with guard.attach(graph).acting(where) as warnings:
        node = graph.add(content, tags, parents=parents, pinned=pinned, kind=kind, source=source or writer,
                         source_ref=source_ref, writer=writer, confidence=confidence, importance=importance,
                         metadata=metadata, node_id=node_id, created_at=created_at, scope=scope)
    return Written(node, list(warnings))


def _visible_parents(graph: SoulGraph, parents: Iterable[str], scope: str) -> list[str]:
    parents = list(parents)
    for parent in parents:
        node = graph.nodes.get(parent) or graph.branch.get(parent)
        if node is not None and node.scope not in (record.DEFAULT_SCOPE, scope):
            raise UnknownNode(parent)
    return parents


def explore(graph: SoulGraph, content: str, tags: Iterable[str] = (), *, parents: Iterable[str] = (),
            where: str = "hypothesis", scope: str = record.DEFAULT_SCOPE) -> Written:
    """A hypothesis goes through the same guard (and again when soul_promote moves it)."""
    parents = _visible_parents(graph, parents, scope)
    with guard.attach(graph).acting(where) as warnings:
        node = graph.explore(content, list(tags), parents=parents, scope=scope)
    return Written(node, list(warnings))
