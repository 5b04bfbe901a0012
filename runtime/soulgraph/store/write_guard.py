"""The place for the write guard in every graph the store holds, filled in from above.

The guard is the memory layer's (memory/guard.py: the scanner, flags, refusals), so the store
does not import it: `soulgraph.memory` installs its policy here when it is imported, and every
command that writes imports it (the MCP server, the memory provider's service, seeding, the
installer, soul-repo import, `python -m soulgraph.memories`, the store's own command line).

A process that writes to a soul without it is refused, never left unguarded: a graph loaded
while nothing is installed gets `Missing`, whose every hook raises `NoWriteGuard`, and a save of
a whole graph cannot be vetted. Reading needs no guard.
"""

from __future__ import annotations

from typing import Any, Protocol

from soulgraph.engine.graph import SoulGraph, SoulGraphError


class GuardPolicy(Protocol):
    """What the memory layer installs."""

    refused: type[Exception]  # what `vet_graph` raises for a graph that holds a secret

    def new(self, vetted: bool) -> Any:
        """A guard for one graph (`SoulGraph.guard`); `vetted`: the graph holds nothing unvetted."""

    def vet_graph(self, graph: SoulGraph) -> Any:
        """Vet every string of a graph built or read without this guard."""


class NoWriteGuard(SoulGraphError):
    """A write in a process where no write guard was installed."""

    def __init__(self) -> None:
        super().__init__("no write guard is installed in this process, so nothing may be written "
                         "(import soulgraph.memory first: it installs the scanner's guard)")


_installed: GuardPolicy | None = None


def install(policy: GuardPolicy) -> None:
    global _installed
    _installed = policy


def installed() -> GuardPolicy | None:
    return _installed


class _Every(frozenset):
    """Every field name: `SoulGraph.update` asks the guard of any string-bearing change."""

    def isdisjoint(self, other: Any) -> bool:
        return False


class Missing:
    """The guard of a graph loaded while none was installed: every write is refused."""

    strings = _Every()

    def __init__(self, vetted: bool) -> None:
        self.vetted = vetted

    def node(self, graph: SoulGraph, node: Any) -> None:
        raise NoWriteGuard()

    def pin(self, graph: SoulGraph, node: Any) -> None:
        raise NoWriteGuard()

    def entry(self, graph: SoulGraph, entry: dict[str, Any]) -> dict[str, Any]:
        raise NoWriteGuard()


def new_guard(vetted: bool) -> Any:
    """The guard a graph the store loads or creates gets."""
    return _installed.new(vetted) if _installed is not None else Missing(vetted)


def needs_vetting(graph: SoulGraph) -> bool:
    return graph.guard is None or not graph.guard.vetted or isinstance(graph.guard, Missing)


def vet(graph: SoulGraph) -> None:
    """Vet a whole graph with the installed policy; NoWriteGuard when there is none."""
    if _installed is None:
        raise NoWriteGuard()
    _installed.vet_graph(graph)


def refused() -> tuple[type[Exception], ...]:
    """The exceptions `vet` raises for a graph it refuses."""
    return (NoWriteGuard,) if _installed is None else (NoWriteGuard, _installed.refused)
