"""Consolidation: what a Hermes session said that should outlive its turns.

Run by the provider before Hermes compresses a conversation (`on_pre_compress`) and when a
session ends (`on_session_end`). It reads the session's turn memories not yet consolidated
and promotes the user's sentences that state a preference, a commitment, a decision, a
lesson or a fact about themselves into typed memories, each built on the turn it came from.
Deterministic rules, no model call: a sentence is promoted when one of `RULES` matches it.
What it writes passes the write guard like any write, and a sentence that reads like prompt
injection (or any sentence of a turn the guard flagged) is never promoted: a typed memory
is read into every prompt. `Consolidation.flagged` counts those left out.
A promoted sentence already held as an active memory of the same kind is confirmed (its
strength grows) instead of added twice. Each turn is marked consolidated (metadata), so a
second pass over the same session adds nothing.

Everything stays in the session's scope (memory/scopes.py): only that user's turns are read,
what they promote is that user's, and only that user's memories are confirmed. One user
saying what another said confirms nothing of the other's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from soulgraph.engine import record
from soulgraph.engine.graph import ACTIVE, SoulGraph
from soulgraph.hermes.turns import session_node, session_turns
from soulgraph.memory import entities, guard, lifecycle, updates
from soulgraph.memory.scopes import SHARED
from soulgraph.memory.write import RefusedMemory, remember

CONSOLIDATED = "consolidated"  # turn metadata key
MAX_SENTENCE = 300
WRITER = "hermes:consolidate"
SOURCE = "hermes:consolidate"  # the source of every memory it writes


@dataclass(frozen=True)
class Rule:
    kind: str
    tag: str
    pattern: re.Pattern[str]


def _rule(kind: str, tag: str, *phrases: str) -> Rule:
    return Rule(kind, tag, re.compile(r"\b(?:" + "|".join(phrases) + r")\b", re.IGNORECASE))


# First match wins, so the narrower kinds come first.
RULES = (
    _rule("communication_preference", "preference",
          r"(?:please\s+)?(?:be|keep it)\s+(?:brief|concise|short|terse)", r"no emojis?",
          r"(?:answer|reply|respond|write)\s+(?:to me\s+)?in\s+\w+", r"call me", r"don'?t call me"),
    _rule("preference", "preference",
          r"i\s+(?:really\s+|much\s+|do\s+)?(?:prefer|like|love|enjoy|hate|dislike|can'?t stand|don'?t like)",
          r"my fav(?:ou)?rite", r"i'?d rather", r"i would rather"),
    _rule("goal_or_commitment", "commitment",
          r"i(?:'ll| will| am going to|'m going to| plan to| intend to| promised to| need to| have to| must)",
          r"remind me", r"deadline", r"due (?:on|by)", r"my goal"),
    _rule("semantic_fact", "decision",
          r"(?:we|i)\s+(?:have\s+)?(?:decided|agreed|chose|settled on|went with)", r"let'?s go with",
          r"the decision is"),
    _rule("tool_or_workflow_lesson", "lesson",
          r"lesson(?:s)? learned", r"next time", r"turns out", r"the (?:fix|trick|problem|cause) (?:was|is)",
          r"don'?t forget to", r"always remember to"),
    _rule("constraint", "constraint",
          r"i(?:'m| am) allergic to", r"i can(?:'t|not) (?:eat|drink|use|have|work|travel|afford)",
          r"(?:never|don'?t|do not) (?:ever )?(?:use|run|deploy|push|schedule|book)", r"must(?:n'?t| not)",
          r"i(?:'m| am) not allowed", r"no more than", r"at most \d", r"my budget (?:is|for)"),
    _rule("routine", "routine",
          r"every (?:morning|evening|night|day|week|month|weekday|weekend|monday|tuesday|wednesday|thursday|"
          r"friday|saturday|sunday)", r"i (?:usually|always|normally|typically)", r"each (?:morning|week|day)",
          r"(?:once|twice|three times) a (?:day|week|month)"),
    _rule("collaborator", "collaborator",
          r"my (?:colleague|co-?worker|teammate|mentor|client|cofounder|co-founder|friend|sister|brother|mom|mum|"
          r"dad|mother|father) (?-i:[A-Z])\w+", r"(?-i:[A-Z])\w+ is my (?:colleague|co-?worker|teammate|mentor|"
          r"client|manager|boss|friend)"),
    _rule("project", "project",
          r"i(?:'m| am) (?:working on|building|writing|developing) (?:a|an|my|the)", r"we(?:'re| are) building",
          r"my (?:side )?project"),
    _rule("timeline_milestone", "milestone",
          r"i (?:just )?(?:finished|completed|launched|shipped|graduated|published|released|passed|won|got promoted)",
          r"we (?:just )?(?:launched|shipped|released|finished|completed)"),
    _rule("intervention_outcome", "outcome",
          # what was tried, named: "that fixed it" alone says nothing a month later
          r"(?:\w+ing\b[\w\s'-]{0,40}?|the \w+(?: \w+)?) (?:fixed|solved|cured|did the trick)",
          r"\w+ing\b[\w\s'-]{0,40}? (?:didn'?t|did not) (?:fix|solve|help)"),
    _rule("semantic_fact", "about-user",
          r"my name is", r"i(?:'m| am) (?:a|an) \w+", r"i (?:work|live|grew up) (?:at|in|for|as|on)",
          r"i(?:'m| am) from", r"my (?:wife|husband|partner|son|daughter|kids?|dog|cat|boss|team|manager)"),
)
# Words a spoken sentence opens with that say nothing ("Also I prefer tea" is "I prefer tea").
_FILLER = re.compile(r"^(?:(?:also|and|so|oh|well|btw|by the way|anyway|actually|ok(?:ay)?|yeah|yes|hey|"
                     r"plus|but|honestly|basically|um|uh)\b[\s,;:-]*)+", re.IGNORECASE)

_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")


@dataclass
class Consolidation:
    added: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, id, content)
    confirmed: list[tuple[str, str]] = field(default_factory=list)  # (kind, id)
    updated: list[updates.Update] = field(default_factory=list)  # earlier memories a turn changed a value of
    refused: int = 0  # sentences the scanner refused
    # Sentences not promoted because they, or the turn they came from, read like prompt
    # injection: a typed memory is read into every prompt, so none is made of them.
    flagged: int = 0
    turns: int = 0

    def summary(self, limit: int = 1200) -> str:
        """What was kept, as lines for Hermes' compression prompt (empty when nothing was)."""
        lines = [f"- {kind}: {content}" for kind, _id, content in self.added]
        if not lines:
            return ""
        text = "Kept in the soul graph from this conversation:\n"
        for line in lines:
            if len(text) + len(line) + 1 > limit:
                break
            text += line + "\n"
        return text.rstrip("\n")


def consolidate(graph: SoulGraph, session_id: str, messages: list[dict[str, Any]] | None = None,
                scope: str = SHARED) -> Consolidation:
    """Promote what the session's unconsolidated turns said (inside `SoulFile.change()`).

    `messages`: the conversation Hermes is about to compress. Its current turn is not synced
    yet (a turn is written when it completes), so the user's messages in it are read too, and
    what they promote is built on the session's last turn (or its session node)."""
    result = Consolidation()
    for turn in session_turns(graph, session_id, scope):
        if turn.metadata.get(CONSOLIDATED):
            continue
        result.turns += 1
        found = user_sentences(turn.content)
        if record.flagged(turn.metadata):
            result.flagged += sum(1 for sentence in found if match(sentence) is not None)
        else:
            for sentence in found:
                _promote(graph, sentence, turn.id, turn.source_ref or session_id, session_id, result, scope)
            _revise(graph, turn, result, scope)
        try:
            graph.update(turn.id, metadata={**turn.metadata, CONSOLIDATED: True})
        except RefusedMemory:  # a turn stored before every field was scanned: it stays as it was
            result.refused += 1
    texts = [_text(m.get("content")) for m in messages or () if isinstance(m, dict) and m.get("role") == "user"]
    if any(texts):
        turns = session_turns(graph, session_id, scope)
        anchor = turns[-1].id if turns else session_node(graph, session_id, "", "", scope).id
        for text in texts:
            if guard.scan(text).injections:  # a message that reads like injection: none of its sentences is kept
                result.flagged += sum(1 for sentence in sentences(text) if match(sentence) is not None)
                continue
            for sentence in sentences(text):
                _promote(graph, sentence, anchor, f"{session_id}#compressed", session_id, result, scope)
    return result


def _promote(graph: SoulGraph, sentence: str, parent: str, source_ref: str, session_id: str,
             result: Consolidation, scope: str = SHARED) -> None:
    rule = match(sentence)
    if rule is None:
        return
    try:  # a sentence that reads like injection never becomes a typed memory
        if guard.inspect(iter([("sentence", sentence)]), "consolidate"):
            result.flagged += 1
            return
    except RefusedMemory:
        result.refused += 1
        return
    existing = _same(graph, sentence, rule.kind, scope)
    if existing is not None:
        held = graph.nodes[existing].source_ref or ""
        if held.split("#", 1)[0] != session_id:  # said again in another session: it holds
            lifecycle.confirm(graph, existing, writer=WRITER)
            result.confirmed.append((rule.kind, existing))
        return
    # Linked to the entities it is about, as the turn it came from is (the names the scope knows
    # count as evidence for one opening the sentence): "what do we know about Priya?" finds it.
    named = entities.recognise(sentence, (), entities.Known(graph, scope))
    try:
        written = remember(graph, sentence, [rule.tag, *entities.link_tags(named)], writer=WRITER, parents=[parent],
                           kind=rule.kind, source=SOURCE, source_ref=source_ref, where="consolidate", scope=scope,
                           metadata={entities.METADATA_KEY: entities.link_metadata(named)} if named else None)
    except RefusedMemory:
        result.refused += 1
        return
    if record.flagged(written.node.metadata):  # flagged by a field besides the sentence: not kept
        graph.remove(written.node.id)
        result.flagged += 1
        return
    # It was said when its turn was, not when the session ended: two values said in one session
    # keep their order (memory/updates.py compares when each was first seen).
    said = graph.nodes[parent].seen_at if parent in graph.nodes else None
    if said is not None and said < written.node.created_at:
        graph.update(written.node.id, first_seen_at=said, last_confirmed_at=said)
    result.added.append((rule.kind, written.node.id, sentence))


def _revise(graph: SoulGraph, turn: Any, result: Consolidation, scope: str) -> None:
    """Earlier memories of this user whose values the turn's user words change (memory/updates.py):
    each is marked with the change, and stays active for the rest of what it says."""
    said = " ".join(user_sentences(turn.content))
    made = [i for _kind, i, content in result.added if turn.id in graph.parents.get(i, ())]
    for change in updates.find(graph, turn, said, scope=scope):
        old = graph.nodes[change.old_id]
        if record.flagged(old.metadata):
            continue
        # A typed memory holds one statement: the typed memory this turn made of the new value
        # replaces it. A turn (or a typed memory with no successor) keeps the rest of what it says.
        successor = next((i for i in made if change.new.lower() in graph.nodes[i].content.lower()), None)
        if old.kind != "episodic_event" and successor is not None:
            lifecycle.supersede(graph, change.old_id, successor, writer=WRITER,
                                reason=f"{change.old} → {change.new}")
        else:
            lifecycle.revise(graph, change.old_id, change.new_id, old=change.old, new=change.new,
                             about=change.about, writer=WRITER)
        result.updated.append(change)


def _text(content: Any) -> str:
    """A message's text (Hermes' content may be a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def user_sentences(turn_content: str) -> list[str]:
    """The sentences of a turn memory's `User:` line."""
    for line in turn_content.splitlines():
        if line.startswith("User: "):
            return sentences(line[len("User: "):])
    return []


def sentences(text: str) -> list[str]:
    """The first 50 sentences of a text (a pasted document is not a list of statements), each
    without the filler words it opens with, capitalised again."""
    out = []
    for found in _SENTENCE.findall(text[:20_000]):
        sentence = _FILLER.sub("", found.strip())
        if len(sentence) > 3:
            out.append(sentence[0].upper() + sentence[1:])
    return out[:50]


def match(sentence: str) -> Rule | None:
    if len(sentence) > MAX_SENTENCE:
        return None  # a paragraph is not one memory
    for rule in RULES:
        if rule.pattern.search(sentence):
            return rule
    return None


def _same(graph: SoulGraph, sentence: str, kind: str, scope: str = SHARED) -> str | None:
    wanted = " ".join(sentence.lower().split())
    for node_id in graph.kinds.get(kind, ()):
        node = graph.nodes[node_id]
        if node.status == ACTIVE and node.scope == scope and " ".join(node.content.lower().split()) == wanted:
            return node_id
    return None
