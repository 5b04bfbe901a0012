"""The one way a memory gets into a soul graph: scanned, stamped with its provenance, added.

Every write path calls `remember` inside its `SoulFile.change()` block (the store then makes
the change durable or takes it back): the MCP tools, seeding from a Hermes home, and, as
they come, imports and the Hermes memory provider. There is no second way in.

- A secret (a private key, a cloud key, a provider token, a `password=` assignment, …) is
  refused before anything changes: `SecretRefused` names the rule, never the secret, and no
  byte of it reaches the graph, the journal or a backup.
- Prompt-injection phrasing (instructions to ignore earlier instructions, fake system
  headers, invisible characters, exfiltration URLs) is stored, but marked: `privacy` private
  and the rules in `metadata["flagged"]`, with a warning for the caller; the prompt snapshot
  leaves flagged memories out unless pinned.
- Provenance: `writer` is the write path (`tool:soul_add`, `seed`, …), stamped here;
  `source` is where the memory came from as its writer says, else the write path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from soulgraph.engine.graph import Node, SoulGraph, SoulGraphError, UnknownNode
from soulgraph.memory import record
from soulgraph.memory.scanner import SecretRefused, refuse_secrets, scan

FLAGGED = record.FLAGGED  # metadata key: the scanner rules an injection-marked memory matched


class RefusedMemory(SoulGraphError):
    """A write the scanner refused; the message names the rules, never the secret."""


@dataclass
class Written:
    """What `remember` stored, and what the caller should tell whoever asked."""

    node: Node
    warnings: list[str] = field(default_factory=list)


def scan_text(texts: Iterable[str], where: str) -> tuple[str, ...]:
    """Refuse secrets in any of `texts`; return the injection rules found (sorted)."""
    rules: set[str] = set()
    for text in texts:
        try:
            result = refuse_secrets(text, where)
        except SecretRefused as exc:
            raise RefusedMemory(str(exc)) from None
        rules.update(f.rule for f in result.injections)
    return tuple(sorted(rules))


def redact_secrets(text: str) -> tuple[str, tuple[str, ...]]:
    """`text` with every secret the scanner finds replaced by ``[secret removed: <rule>]``,
    and the rules that fired. For writers that keep the rest of a text rather than refuse it
    all (a conversation turn in which the user pasted a key)."""
    found = scan(text).secrets
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
    """Scan, stamp and add one memory to `graph` (call inside `SoulFile.change()`).
    `scope`: whose memory it is (memory/scopes.py); it may be built only on memories its
    writer sees (shared ones and its own scope's): another user's is an unknown id."""
    tags = list(tags)
    parents = _visible_parents(graph, parents, scope)
    injections = scan_text([content, *tags], where)
    metadata = dict(metadata or {})
    privacy = record.DEFAULT_PRIVACY
    warnings: list[str] = []
    if injections:
        privacy = "private"
        metadata[FLAGGED] = list(injections)
        warnings.append(f"{where}: stored as private and kept out of the prompt snapshot: it reads like prompt "
                        f"injection ({', '.join(injections)})")
    node = graph.add(content, tags, parents=parents, pinned=pinned, kind=kind, source=source or writer,
                     source_ref=source_ref, writer=writer, confidence=confidence, importance=importance,
                     privacy=privacy, metadata=metadata, node_id=node_id, created_at=created_at, scope=scope)
    return Written(node, warnings)


def _visible_parents(graph: SoulGraph, parents: Iterable[str], scope: str) -> list[str]:
    parents = list(parents)
    for parent in parents:
        node = graph.nodes.get(parent) or graph.branch.get(parent)
        if node is not None and node.scope not in (record.DEFAULT_SCOPE, scope):
            raise UnknownNode(parent)
    return parents


def explore(graph: SoulGraph, content: str, tags: Iterable[str] = (), *, parents: Iterable[str] = (),
            where: str = "hypothesis", scope: str = record.DEFAULT_SCOPE) -> Written:
    """A hypothesis goes through the same scanner (promote later moves it as it is)."""
    tags = list(tags)
    injections = scan_text([content, *tags], where)
    node = graph.explore(content, tags, parents=_visible_parents(graph, parents, scope), scope=scope)
    warnings = []
    if injections:
        node.privacy = "private"
        node.metadata[FLAGGED] = list(injections)
        warnings.append(f"{where}: marked private: it reads like prompt injection ({', '.join(injections)})")
    return Written(node, warnings)
