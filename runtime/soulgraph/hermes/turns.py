"""Conversation turns as episodic memories: what the Hermes provider's `sync_turn` writes.

Each Hermes session gets a session node; each completed turn becomes an `episodic_event`
memory built on the turn before it (the first on the session node), so the DAG keeps the
conversation's order and `related` walks from a recalled turn to its neighbours. Tags:
`session:<id>` on both, `turn` on turns. Provenance: source `hermes:sync_turn`, source_ref
`<session id>#<turn number>`, writer the platform user id when Hermes gives one.

What a turn keeps: the user's words (up to `USER_CHARS`), the assistant's answer (up to
`ASSISTANT_CHARS`), the names of the tools it used, and a tool's result only when it is short
(`TOOL_RESULT_CHARS`): a fetched web page or a file dump is not a memory. Secrets in the text
are cut out before anything is written (`memory.write.redact_secrets`); then the write guard
checks every field as for any write: a secret left in another field (the session id, the user
id, the platform, the sender's metadata) refuses the turn, and a turn that reads like prompt
injection is stored flagged (private, withheld from prompts, never consolidated).

Entities (memory/entities.py): the people, places and other named things the user's and the
assistant's words name (after the secrets are cut out) tag the turn `entity:<key>`, their names
as written and their types in `metadata["entities"]`; `speakers` (the user's own names) and the
entities the scope already knows count as evidence for a name that opens a sentence.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable

from soulgraph.engine.graph import Node, SoulGraph
from soulgraph.memory import entities
from soulgraph.memory.scopes import SHARED
from soulgraph.memory.write import redact_secrets, remember

USER_CHARS = 1500
ASSISTANT_CHARS = 800
TOOL_RESULT_CHARS = 160
TURN_TAG = "turn"
SOURCE = "hermes:sync_turn"


def session_tag(session_id: str) -> str:
    return f"session:{session_id or 'unnamed'}"


@dataclass
class TurnWritten:
    node: Node
    redacted: tuple[str, ...]  # the secret rules whose matches were cut out
    warnings: list[str]


def record_turn(graph: SoulGraph, user: str, assistant: str, *, session_id: str, platform: str = "",
                user_id: str = "", messages: list[dict[str, Any]] | None = None,
                metadata: dict[str, Any] | None = None, scope: str = SHARED,
                speakers: Iterable[str] = ()) -> TurnWritten:
    """Add one completed turn to `graph` (inside `SoulFile.change()`), chained after the
    session's last turn. `metadata`: more to keep on the memory (the sender's turn id);
    `scope`: the user's (memory/scopes.py), the turn's and its session node's; `speakers`: the
    user's own names, recognised as people wherever the turn names them."""
    tag = session_tag(session_id)
    turns = session_turns(graph, session_id, scope)
    parent = turns[-1] if turns else session_node(graph, session_id, platform, user_id, scope)
    text, redacted = redact_secrets(turn_text(user, assistant, messages))
    number = len(turns) + 1
    named = entities.recognise(_spoken(text), speakers, entities.Known(graph, scope))
    about = {entities.METADATA_KEY: entities.link_metadata(named)} if named else {}
    written = remember(graph, text, [tag, TURN_TAG, *entities.link_tags(named)], writer=user_id or "hermes",
                       parents=[parent.id], kind="episodic_event", source=SOURCE, source_ref=f"{session_id}#{number}",
                       metadata={**(metadata or {}), "platform": platform, "turn": number, **about}, where="sync_turn",
                       scope=scope)
    return TurnWritten(written.node, redacted, written.warnings)


def session_turns(graph: SoulGraph, session_id: str, scope: str = SHARED) -> list[Node]:
    """The session's turn memories in the order they were written: those of `scope` only,
    so a client that names another user's session id never reaches that user's turns."""
    ids = graph.tags.get(session_tag(session_id), set()) & graph.tags.get(TURN_TAG, set())
    return sorted((node for i in ids if (node := graph.nodes[i]).scope == scope),
                  key=lambda n: (n.metadata.get("turn", 0), n.created_at, n.id))


def session_node(graph: SoulGraph, session_id: str, platform: str, user_id: str, scope: str = SHARED) -> Node:
    tag = session_tag(session_id)
    for node_id in sorted(graph.tags.get(tag, ())):
        node = graph.nodes[node_id]
        if TURN_TAG not in node.tags and node.scope == scope:
            return node
    when = datetime.fromtimestamp(graph.clock(), timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    where = f" on {platform}" if platform else ""
    return remember(graph, f"Hermes session {session_id or 'unnamed'}{where}, {when}", [tag],
                    writer=user_id or "hermes", kind="episodic_event", source="hermes:session",
                    source_ref=session_id or None, metadata={"platform": platform}, where="sync_turn",
                    scope=scope).node


def turn_text(user: str, assistant: str, messages: Iterable[dict[str, Any]] | None = None) -> str:
    """The text a turn is remembered by (see the module text)."""
    lines = [f"User: {_cut(user, USER_CHARS)}"]
    tools = _tool_lines(list(messages or ()))
    lines += tools
    if assistant and assistant.strip():
        lines.append(f"Assistant: {_cut(assistant, ASSISTANT_CHARS)}")
    return "\n".join(lines)


def _spoken(text: str) -> str:
    """What the user and the assistant said in a turn's text, a line each, without the
    "User:" and "Assistant:" labels and without the tool lines."""
    lines = []
    for line in text.split("\n"):
        for label in ("User: ", "Assistant: "):
            if line.startswith(label):
                lines.append(line[len(label):])
    return "\n".join(lines)


def _cut(text: str, limit: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _tool_lines(messages: list[dict[str, Any]]) -> list[str]:
    """The tools used since the turn's user message: names, and short results only."""
    start = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1) + 1
    names: dict[str, str] = {}  # tool call id -> tool name
    lines = []
    for message in messages[start:]:
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            names[str(call.get("id"))] = str(function.get("name") or call.get("name") or "tool")
        if message.get("role") == "tool":
            name = names.get(str(message.get("tool_call_id")), message.get("name") or "tool")
            result = message.get("content")
            result = result if isinstance(result, str) else str(result or "")
            result = " ".join(result.split())
            if len(result) <= TOOL_RESULT_CHARS:
                lines.append(f"Tool {name}: {result}")
            else:
                lines.append(f"Tool {name}: (a result of {len(result):,} characters, not kept)")
    return lines
