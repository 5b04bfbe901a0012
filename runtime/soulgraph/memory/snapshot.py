"""The bounded snapshot: what the agent should always have in its prompt, as compact text.

Seed 002's layer 1 (Hermes' frozen memory block): built from the graph at session start,
byte-identical for the same graph state (so a prompt prefix cache stays warm), and never
longer than `max_chars` (default 2,200, Hermes' own MEMORY.md budget). Sections, in order:

    Identity      pinned memories, oldest first (the persona reads in its own order)
    Commitments   goal_or_commitment
    Preferences   preference, communication_preference
    Projects      project
    Recent        the hottest other memories (not the conversation turns the Hermes provider
                  records: what mattered in them is promoted into typed memories)

Shares (issue 13): Identity takes at most 40 % of the budget and, while there are other
memories to show, 25 % is kept for Recent, so a long SOUL.md (which Hermes puts in the prompt
anyway) never crowds out what the agent has been doing. Budget a section leaves unused goes
to the sections after it.

Within a section the hottest come first (at most 64 are looked at per section, so the build
stays well under 2 ms however big the graph) (the splay tree's key: use count and last use, not
the clock, so the text does not change while the graph does not). Only active memories in
default recall; a memory marked private by its writer is left out unless pinned, and a
flagged one (it reads like prompt injection, memory/flagged.py) is left out always, pinned or
not, without taking a candidate's place. Each memory is one line, `- <text>`, cut at 300 characters; a line that does
not fit the remaining budget is left out (never cut mid-budget), so the block always ends
on a whole line. Given a reader's `where` (memory/scopes.py), only the memories it accepts are
looked at, so another user's never appear and never take a candidate's place.

No repeats: `known` is text the prompt already holds (Hermes puts MEMORY.md, USER.md and SOUL.md
in its system prompt itself); a memory whose text is in it is left out and takes no place. A
line another line of the block already says (the same words, or held within it) is left out
too. Only what is valid now: a memory whose `valid_to` has passed, or whose `valid_from` is
still to come, is not shown.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Callable, Iterable, Iterator

from soulgraph.engine import record
from soulgraph.engine.graph import ACTIVE, Node, SoulGraph

DEFAULT_MAX_CHARS = 2200
LINE_CHARS = 300
# At most this many candidates per section are looked at (a 2,200-character budget holds a few
# dozen lines), so the build does not grow with the graph.
CANDIDATES = 64
IDENTITY_SHARE = 0.40  # of max_chars, at most
RECENT_RESERVE = 0.25  # of max_chars, kept for Recent while the sections before it are written
SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Commitments", ("goal_or_commitment",)),
    ("Preferences", ("preference", "communication_preference")),
    ("Projects", ("project",)),
)


def _line(node: Node) -> str:
    text = " ".join(node.content.split())
    if len(text) > LINE_CHARS:
        text = text[: LINE_CHARS - 1].rstrip() + "…"
    return f"- {text}\n"


def _hottest(nodes: Iterable[Node]) -> list[Node]:
    return heapq.nsmallest(CANDIDATES, nodes, key=lambda node: (-node.recency_key, node.id))


# Conversation turns the Hermes provider records word for word: what mattered in them is
# promoted into typed memories (hermes/consolidate.py); the raw turns stay out of the block.
CONVERSATION_SOURCES = frozenset({"hermes:sync_turn", "hermes:session"})


def _recent(graph: SoulGraph, where: Callable[[Node], bool] | None = None) -> Iterator[Node]:
    """The hottest memories that are not pinned, straight off the splay tree (recorded
    conversation turns left out)."""
    nodes = graph.nodes
    return (node for _key, node_id in graph.order.descending()
            if not (node := nodes[node_id]).pinned and node.source not in CONVERSATION_SOURCES
            and not record.flagged(node.metadata) and (where is None or where(node)))


def _in_recall(node: Node, now: float) -> bool:
    return (node.status == ACTIVE and (node.privacy == "normal" or node.pinned) and not record.flagged(node.metadata)
            and (node.valid_to is None or node.valid_to > now) and (node.valid_from is None or node.valid_from <= now))


MIN_REPEAT_CHARS = 12  # a shorter text held in another ("tea") is no repeat of it


def _plain(text: str) -> str:
    """The form two copies of one statement share: lower case, whitespace collapsed, markdown
    bullets and end punctuation dropped."""
    return " ".join(text.lower().replace("§", " ").split()).strip(" -*.")


def render(graph: SoulGraph, max_chars: int = DEFAULT_MAX_CHARS, *, where: Callable[[Node], bool] | None = None,
           known: Iterable[str] = ()) -> str:
    """The snapshot text, at most `max_chars` characters; `where`: only the memories it accepts;
    `known`: text the prompt already holds, never repeated here."""
    held = "\n".join(_plain(line) for text in known for line in text.splitlines())
    now = graph.clock()
    said: list[str] = []  # the plain text of each line shown

    def repeats(node: Node) -> bool:
        text = _plain(node.content)
        if len(text) >= MIN_REPEAT_CHARS and text in held:
            return True
        return any(text == other or (len(text) >= MIN_REPEAT_CHARS and text in other)
                   or (len(other) >= MIN_REPEAT_CHARS and other in text) for other in said)

    def kept(nodes: Iterable[Node]) -> Iterable[Node]:
        # Flagged memories never: not even pinned ones (a pinned injection would lead every prime).
        nodes = (node for node in nodes if not record.flagged(node.metadata))
        return nodes if where is None else filter(where, nodes)

    budget = max_chars
    out: list[str] = []
    shown: set[str] = set()

    def section(title: str, nodes: Iterable[Node], cap: float) -> None:
        """Lines of `nodes` within min(budget, cap) characters, header included."""
        nonlocal budget
        header = f"{title}:\n"
        room = min(budget, int(cap))
        lines: list[str] = []
        cost = len(header)
        for node in itertools.islice(nodes, CANDIDATES):
            if node.id in shown or not _in_recall(node, now) or repeats(node):
                continue
            line = _line(node)
            if cost + len(line) > room:
                continue  # a shorter one further down may still fit
            lines.append(line)
            cost += len(line)
            shown.add(node.id)
            said.append(_plain(node.content))
        if lines:
            out.append(header)
            out.extend(lines)
            budget -= cost

    has_recent = next((True for node in itertools.islice(_recent(graph, where), CANDIDATES)
                       if _in_recall(node, now) and not repeats(node)), False)
    reserve = int(max_chars * RECENT_RESERVE) if has_recent else 0
    pinned = heapq.nsmallest(CANDIDATES, kept(graph.nodes[i] for i in graph.pinned), key=lambda node: (node.created_at, node.id))
    section("Identity", pinned, min(max_chars * IDENTITY_SHARE, budget - reserve))
    for title, kinds in SECTIONS:
        section(title, _hottest(kept(graph.nodes[i] for kind in kinds for i in graph.kinds.get(kind, ()))), budget - reserve)
    section("Recent", _recent(graph, where), budget)
    return "".join(out)
