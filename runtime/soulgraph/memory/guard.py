"""The write guard: every string a writer puts into a soul graph passes the scanner here.

The engine calls the guard (`SoulGraph.guard`) from each mutation that can carry a
writer's text: `add`, `explore`, `promote`, an `update` of a string-bearing field, `tag`,
`pin` and `log` (an audit entry). The store (store/soulfile.py) gives every graph it loads or
creates one (`Policy`, which the store finds by the `soulgraph.write_guard` entry point, or
which importing soulgraph.memory installs: the store imports nothing from here), so every persisted write — the MCP tools, seeding, install, soul-repo import,
turn capture, consolidation, the memory service, the store's commands — passes it.

- Every string is scanned: the content, each tag, kind, source, source_ref, writer, scope,
  every other text field a node has, and every key and value inside its metadata, however
  deeply nested (only the guard's own bookkeeping, `metadata["flagged"]`, is skipped).
- A secret anywhere refuses the write: `RefusedMemory` names the write path and the field
  ("soul_add: source: refused, the text holds 1 secret (github-token); …"), never the
  secret. Inside `SoulFile.change()` the store then takes the whole change back.
- Prompt injection in any field flags the node: `metadata["flagged"]` holds the rules
  (`record.flagged()` reads them), privacy becomes "private", and the node is not pinned: a
  flagged memory cannot be pinned (`pin` is refused; an add asking for a pin is stored
  unpinned, with a warning saying so). The flag is a function of the node's current strings:
  an edit that makes them flagged unpins and flags the node, one that makes them clean drops
  the flag (and the private marking it set).
- An audit entry's strings (a reason above all: soul_history shows it to agents) are scanned
  too: a secret refuses the change; an injection is stored as `WITHHELD` instead of the text.
- A text an operator released as a false alarm (`python -m soulgraph.memories release`, which
  leaves a `release` audit entry and the text's digest, memory/flagged.py) is not flagged again
  while it stays that text; secrets in it are still refused.

Strength and use updates (`confirm`, `splay`) change no string and are not rescanned. Short
strings (kinds, writers, tags, sources) repeat across writes; their scans are remembered.
The scanner is imported on the first scan, so importing the store stays cheap.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
from typing import Any, Iterable, Iterator, Sequence

from soulgraph.engine import record
from soulgraph.engine.graph import Node, SoulGraph, SoulGraphError

FLAGGED = record.FLAGGED
# A memory stored beside flagged text in a seeded or imported file (another paragraph of the same
# § entry or list item, a later entry of the same section: `context_of`) carries that text's
# rules here, and the guard flags it for them as for its own: a jailbreak split into paragraphs,
# or by headings and list items of its own, is not let in a piece at a time.
CONTEXT = "flagged_context"
# Metadata keys the guard itself writes or reads as its own: not writer text, never scanned.
BOOKKEEPING = frozenset({FLAGGED, CONTEXT})
# Node fields whose change (`SoulGraph.update`) means a rescan: every field that holds text.
STRING_FIELDS = frozenset(f.name for f in dataclasses.fields(Node)
                          if f.name not in ("id", "status", "privacy")
                          and ("str" in str(f.type) or "list" in str(f.type) or "dict" in str(f.type)))
# What an audit string that reads like prompt injection is stored as.
WITHHELD = "[withheld: reads like prompt injection ({rules})]"
_CACHED_CHARS = 120  # strings up to this long have their scans remembered


class RefusedMemory(SoulGraphError):
    """A write the scanner refused; the message names the field and the rules, never the secret."""


class FlaggedPin(RefusedMemory):
    """A pin of a memory the scanner flagged: a flagged memory cannot be pinned."""


@functools.lru_cache(maxsize=1)
def _scanner() -> Any:
    from soulgraph.memory import scanner  # here, not at import: the store loads this module

    return scanner


@functools.lru_cache(maxsize=8192)
def _scan_short(text: str) -> Any:
    return _scanner().scan(text)


# Identifiers the code itself makes, which hold no word: node ids (`n42`) and the audit trail's
# record digests (16 hex digits, memory/lifecycle.py). They cannot carry a secret or an
# instruction, and a digest is new every time (no remembered scan), so they are not scanned.
_INERT = re.compile(r"n[0-9]{1,12}|[0-9a-f]{16}")


def scan(text: str) -> Any:
    """The scanner's result for one text (remembered for short ones: the scan is pure)."""
    if len(text) <= _CACHED_CHARS:
        return _CLEAN if _INERT.fullmatch(text) else _scan_short(text)
    return _scanner().scan(text)


class _Clean:
    clean, secrets, injections, findings, rules = True, (), (), (), ()


_CLEAN = _Clean()


def strings(value: Any, path: str, skip: frozenset[str] = frozenset()) -> Iterator[tuple[str, str]]:
    """(field path, text) for every string in `value`: lists and dicts walked, dict keys
    included; keys in `skip` left out at the top level."""
    if isinstance(value, str):
        if value:
            yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key in skip:
                continue
            if isinstance(key, str):
                yield from strings(key, f"{path} (a key)")
            yield from strings(item, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for at, item in enumerate(value):
            yield from strings(item, f"{path}[{at}]")


def node_strings(node: Node) -> Iterator[tuple[str, str]]:
    """Every writer string of a node: each text field, each tag, all of its metadata."""
    for name in _node_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, str):  # most fields: no walk
            if value:
                yield name, value
        elif isinstance(value, (dict, list, tuple)):
            yield from strings(value, name, BOOKKEEPING if name == "metadata" else frozenset())


@functools.lru_cache(maxsize=None)
def _node_fields(kind: type) -> tuple[str, ...]:
    """A node class's field names (dataclasses.fields walks the class at every call)."""
    return tuple(f.name for f in dataclasses.fields(kind))


def inspect(fields: Iterator[tuple[str, str]], where: str) -> dict[str, tuple[str, ...]]:
    """Refuse (RefusedMemory) if any text holds a secret; else {field: injection rules} for
    the fields that read like prompt injection."""
    flagged: dict[str, tuple[str, ...]] = {}
    for name, text in fields:
        result = scan(text)
        if result.clean:
            continue
        if result.secrets:
            scanner = _scanner()
            try:
                scanner.refuse_secrets(text, f"{where}: {name}")
            except scanner.SecretRefused as exc:
                raise RefusedMemory(str(exc)) from None
        rules = tuple(sorted({f.rule for f in result.injections}))
        if rules:
            flagged[name] = rules
    return flagged


def _with_context(node: Node, found: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """`found`, plus the rules of the flagged text the node was written beside (CONTEXT)."""
    context = node.metadata.get(CONTEXT) if node.metadata else None
    rules = context.get("rules") if isinstance(context, dict) else None
    if rules and isinstance(rules, list):
        found = {**found, "context": tuple(sorted(str(rule) for rule in rules))}
    return found


def context_of(texts: Sequence[str], stretches: Iterable[Any]) -> dict[int, list[str]]:
    """The injection rules of the flagged text each block of a file is written beside.

    `texts[i]` is block i's text; `stretches` are the file's stretches as
    `hermes.markdown_entries.stretches` gives them (each with `blocks`, `whole` and `reach`).
    A stretch is flagged when any of its blocks reads like prompt injection, or, when `whole`,
    when its blocks read as one text do; its rules go to every block it reaches. Returns
    {block index: rules} for the blocks that get some."""
    rules: dict[int, set[str]] = {}
    for stretch in stretches:
        found: set[str] = set()
        for at in stretch.blocks:
            found.update(f.rule for f in scan(texts[at]).injections)
        if stretch.whole and len(stretch.blocks) > 1:
            found.update(f.rule for f in scan("\n".join(texts[at] for at in stretch.blocks)).injections)
        if found:
            for at in stretch.reach:
                rules.setdefault(at, set()).update(found)
    return {at: sorted(found) for at, found in sorted(rules.items())}


def _released(graph: SoulGraph, node: Node) -> bool:
    """An operator released this very text as a false alarm (memory/flagged.py): not flagged again."""
    from soulgraph.memory import flagged  # here: it is the read side's module, not needed to vet a write

    return flagged.released_by_operator(graph, node)


def _where(writer: Any, default: str) -> str:
    if isinstance(writer, str) and writer:
        return writer.removeprefix("tool:")
    return default


class WriteGuard:
    """The hook `SoulGraph.guard` holds (see the module text). `acting(where)` names the write
    path for messages and collects the warnings of the writes made inside it."""

    strings = STRING_FIELDS

    def __init__(self, *, vetted: bool = True) -> None:
        # False: the graph holds nodes this guard never saw (read from a file): a `save` of
        # the whole graph vets them all first (`vet_graph`).
        self.vetted = vetted
        self._where: str | None = None
        self._notes: list[str] | None = None

    @contextlib.contextmanager
    def acting(self, where: str) -> Iterator[list[str]]:
        outer = self._where, self._notes
        self._where, self._notes = where, []
        try:
            yield self._notes
        finally:
            self._where, self._notes = outer

    def _note(self, text: str) -> None:
        if self._notes is not None:
            self._notes.append(text)

    # ------------------------------------------------------------------ the engine's hooks
    def node(self, graph: SoulGraph, node: Node) -> None:
        """A node about to enter the graph or the branch, or a node's next state: refuse it
        (raise, before anything is marked) or mark it (flag, unflag, pin dropped)."""
        where = self._where or _where(node.writer, "write")
        found = _with_context(node, inspect(node_strings(node), where))
        mark(node, {} if found and _released(graph, node) else found, where, self._note)

    def pin(self, graph: SoulGraph, node: Node) -> None:
        rules = record.flagged(node.metadata)
        if rules:
            raise FlaggedPin(f"{node.id} is flagged: it reads like prompt injection ({', '.join(rules)}), and a "
                             "flagged memory cannot be pinned (its text is withheld from prompts)")

    def entry(self, graph: SoulGraph, entry: dict[str, Any]) -> dict[str, Any]:
        """An audit entry about to be logged: a secret in any of its strings refuses the change;
        a string that reads like prompt injection is kept as `WITHHELD`."""
        where = self._where or _where(entry.get("writer"), "audit")
        found = inspect(((key, value) for key, value in entry.items() if isinstance(value, str) and value), where)
        found.update(inspect(((name, text) for key, value in entry.items() if not isinstance(value, str)
                              for name, text in strings(value, key)), where))
        if not found:
            return entry
        kept = dict(entry)
        for name, rules in found.items():
            if name in kept and isinstance(kept[name], str):
                kept[name] = WITHHELD.format(rules=", ".join(rules))
            else:  # inside a list or an object: the whole value goes
                top = name.split(".", 1)[0].split("[", 1)[0].split(" ", 1)[0]
                kept[top] = WITHHELD.format(rules=", ".join(rules))
        self._note(f"{where}: {', '.join(sorted(found))}: withheld from the audit trail, it reads like prompt "
                   f"injection ({', '.join(sorted({r for rules in found.values() for r in rules}))})")
        return kept


def mark(node: Node, found: dict[str, tuple[str, ...]], where: str, note: Any = None) -> None:
    """Make the node's flag what its strings say: flagged (private, unpinned) or not."""
    rules = sorted({rule for field_rules in found.values() for rule in field_rules})
    if rules:
        node.metadata[FLAGGED] = rules
        node.privacy = "private"
        dropped = node.pinned
        node.pinned = False
        if note is not None:
            note(f"{where}: {', '.join(found)}: stored as private and withheld from prompts: it reads like prompt "
                 f"injection ({', '.join(rules)})" + ("; not pinned: a flagged memory cannot be pinned" if dropped else ""))
    else:
        node.metadata.pop(FLAGGED, None)
        if node.privacy == "private":
            node.privacy = record.DEFAULT_PRIVACY  # only a flag marks a memory private: it goes with it


def attach(graph: SoulGraph) -> WriteGuard:
    """The graph's guard, given one first if it has none."""
    if graph.guard is None:
        graph.guard = WriteGuard(vetted=not graph.nodes and not graph.branch and not graph.audit)
    return graph.guard


def vet_graph(graph: SoulGraph, where: str = "save") -> list[str]:
    """Every node, hypothesis and audit entry of a graph built without this guard, vetted as
    if written now (a secret refuses; injection flags). Returns the ids flagged."""
    flagged = []
    for node in [*graph.nodes.values(), *graph.branch.values()]:
        found = _with_context(node, inspect(node_strings(node), _where(node.writer, where)))
        if found and _released(graph, node):
            found = {}
        was_pinned = node.pinned
        mark(node, found, where)
        if node.id in graph.nodes:
            if was_pinned and not node.pinned:
                graph.pinned.discard(node.id)
            graph.dirty.add(node.id)
        if found:
            flagged.append(node.id)
    if graph.branch:
        graph.branch_dirty = True
    guard = graph.guard if isinstance(graph.guard, WriteGuard) else WriteGuard()
    graph.audit = [guard.entry(graph, entry) for entry in graph.audit]
    guard.vetted = True
    graph.guard = guard
    return flagged


class Policy:
    """This guard, as the store holds a place for it (store/write_guard.py); soulgraph.memory
    installs it on import."""

    refused = RefusedMemory

    def new(self, vetted: bool) -> WriteGuard:
        return WriteGuard(vetted=vetted)

    def vet_graph(self, graph: SoulGraph) -> list[str]:
        return vet_graph(graph)


def flagged_nodes(graph: SoulGraph) -> list[Node]:
    """The graph's flagged memories, in id order of creation."""
    return sorted((node for node in graph.nodes.values() if record.flagged(node.metadata)),
                  key=lambda node: (node.created_at, node.id))
