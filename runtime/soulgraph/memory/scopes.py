"""Whose memory a memory is: scopes, so that one user of an agent never reads another's.

A Hermes gateway serves many people through one agent (Telegram, Discord, Slack, an
OpenAI-compatible API). Every memory carries a `scope` (engine/record.py):

- `""`, **shared**: the agent's own memory, seen by every user of it: its SOUL.md, skills,
  imported soul repos, lessons the operator approved, and what was said in sessions that
  have no user (the operator at the CLI). Every memory written before scopes existed
  (schema 3 and older) is shared.
- `platform:user`, **one user's**: what that user said or had the agent remember. `user` is
  Hermes' own key for a participant, `user_id_alt or user_id` (gateway/session.py: Signal's
  UUID and Feishu's union_id are stable where the phone number or open_id is not).

A `Reader` is who is reading: it sees the shared memories and those of its own scope,
never another user's. Every read path takes `Reader.where(graph)`, the predicate the
engine's walks and listings accept, and `Reader.hidden_ids(graph)`, the ids a search leaves
out as it goes (`exclude=`); both cost nothing when the graph holds no memory the reader must
not see. Writes carry the writer's scope; turning a user's
memory into a shared one is an operator's act (`python -m soulgraph.memories share`), never
automatic.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import AbstractSet, Callable

from soulgraph.engine import record
from soulgraph.engine.graph import Node, SoulGraph, UnknownNode

SHARED = record.DEFAULT_SCOPE
SHARED_NAME = "shared"  # how the CLI and the tools name the shared scope
MAX_SCOPE_CHARS = 300
_PLATFORM = re.compile(r"[a-z0-9][a-z0-9_.-]{0,39}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

Where = Callable[[Node], bool]


class ScopeError(ValueError):
    """Text that is not a scope; the message says why."""


def check(scope: str) -> str:
    """`scope` if it is one (`""`, or `platform:user`), else ScopeError saying what is wrong."""
    if scope == SHARED:
        return scope
    if not isinstance(scope, str):
        raise ScopeError(f"a scope must be a string, got {type(scope).__name__}")
    platform, colon, user = scope.partition(":")
    if not colon or not user.strip():
        raise ScopeError(f"scope {scope!r:.80} is not 'platform:user' (e.g. telegram:1001) or {SHARED_NAME!r}")
    if not _PLATFORM.fullmatch(platform):
        raise ScopeError(f"scope {scope!r:.80}: the platform must be lower-case letters, digits, '_', '.' or '-'")
    if len(scope) > MAX_SCOPE_CHARS or _CONTROL.search(scope) or user != user.strip():
        raise ScopeError(f"scope {scope!r:.80}: the user must be at most {MAX_SCOPE_CHARS} characters, "
                         "without control characters or surrounding spaces")
    return scope


def parse(text: str) -> str:
    """A scope as an operator writes it: `shared`, or `platform:user`."""
    text = text.strip()
    return SHARED if text in (SHARED_NAME, SHARED) else check(text)


def argument(text: str) -> str:
    """`parse` as an argparse type: a bad scope is a usage error that says why."""
    try:
        return parse(text)
    except ScopeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def label(scope: str) -> str:
    """A scope as the tools and the CLI show it."""
    return scope or SHARED_NAME


def user_scope(platform: str | None, user_id: str | None, user_id_alt: str | None = None) -> str:
    """The scope of the user Hermes names at `initialize`: shared when there is none."""
    who = str(user_id_alt or user_id or "").strip()
    if not who:
        return SHARED
    place = re.sub(r"[^a-z0-9_.-]", "-", str(platform or "").strip().lower())[:40].strip("-_.") or "unknown"
    clean = _CONTROL.sub("", who)[:MAX_SCOPE_CHARS - len(place) - 1].strip()
    # An id of control characters alone still names someone: by its bytes, never as shared.
    return check(f"{place}:{clean or 'x' + who.encode('utf-8', 'surrogatepass').hex()[:200]}")


def users(graph: SoulGraph) -> dict[str, int]:
    """Each user scope the graph holds memories of, with how many."""
    return {scope: len(ids) for scope, ids in sorted(graph.scopes.items())}


@dataclass(frozen=True)
class Reader:
    """Who reads: the shared memories and `scope`'s (one user's, or none more when shared)."""

    scope: str = SHARED

    def __post_init__(self) -> None:
        check(self.scope)

    @property
    def name(self) -> str:
        return label(self.scope)

    def sees(self, node: Node) -> bool:
        return node.scope == SHARED or node.scope == self.scope

    def hidden(self, graph: SoulGraph) -> list[str]:
        """The user scopes in `graph` this reader does not see."""
        return sorted(scope for scope in graph.scopes if scope != self.scope)

    def where(self, graph: SoulGraph, also: Where | None = None) -> Where | None:
        """The predicate for the engine's reads: this reader's nodes (and `also`'s, if given);
        None when nothing in `graph` is hidden from it and there is no `also`."""
        if not any(scope != self.scope for scope in graph.scopes):
            return also
        mine = self.scope
        if also is None:
            return lambda node: node.scope == SHARED or node.scope == mine
        return lambda node: (node.scope == SHARED or node.scope == mine) and also(node)

    def hidden_ids(self, graph: SoulGraph) -> AbstractSet[str]:
        """The ids this reader must never get: for searches (`exclude=`), which leave them out
        as they go and so stay the fast pruned search. Kept up to date by the graph."""
        return graph.hidden_from(self.scope) if graph.scopes else frozenset()

    def get(self, graph: SoulGraph, node_id: str) -> Node:
        """The node, if this reader may see it; otherwise the engine's own "unknown node id"
        error, so a reader cannot tell another user's memory from none."""
        node = graph.get(node_id)
        if not self.sees(node):
            raise UnknownNode(node_id)
        return node


SHARED_READER = Reader()
