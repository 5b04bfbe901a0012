"""The place for the write guard in every graph the store holds, filled in from above.

The guard is the memory layer's (memory/guard.py: the scanner, flags, refusals), so the store
does not import it. It is found one of two ways: `soulgraph.memory` installs its policy here when
it is imported, and otherwise the first graph the store loads looks it up by the packaging entry
point group `soulgraph.write_guard` (runtime/pyproject.toml names `soulgraph.memory.guard:Policy`),
as a plugin is found: the store knows the group's name, never the module.

A process where neither finds one (the runtime's files on a path without its package metadata,
memory/ left out) is refused every write, never left unguarded: a graph loaded then gets
`Missing`, whose every hook raises `NoWriteGuard`, and a save of a whole graph cannot be vetted.
Reading needs no guard.
"""

from __future__ import annotations

from importlib.metadata import entry_points
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
                         f"(no {GROUP} entry point was found: install the soulgraph package, or import "
                         "soulgraph.memory first, which installs the scanner's guard)")


GROUP = "soulgraph.write_guard"
_installed: GuardPolicy | None = None
_looked_up = False


def install(policy: GuardPolicy) -> None:
    global _installed
    _installed = policy


def installed() -> GuardPolicy | None:
    """The policy in force: the one installed, else the entry point's (looked up once)."""
    global _looked_up
    if _installed is None and not _looked_up:
        _looked_up = True
        for point in sorted(entry_points(group=GROUP), key=lambda p: p.name):
            install(point.load()())
            break
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
    policy = installed()
    return policy.new(vetted) if policy is not None else Missing(vetted)


def needs_vetting(graph: SoulGraph) -> bool:
    return graph.guard is None or not graph.guard.vetted or isinstance(graph.guard, Missing)


def vet(graph: SoulGraph) -> None:
    """Vet a whole graph with the installed policy; NoWriteGuard when there is none."""
    policy = installed()
    if policy is None:
        raise NoWriteGuard()
    policy.vet_graph(graph)


def refused() -> tuple[type[Exception], ...]:
    """The exceptions `vet` raises for a graph it refuses."""
    policy = installed()
    return (NoWriteGuard,) if policy is None else (NoWriteGuard, policy.refused)
