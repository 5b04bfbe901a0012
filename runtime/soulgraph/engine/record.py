"""The memory record: what every node says about itself besides its text.

Seed 002's typed, sourced, correctable memory. Each node carries (schema 4 of soul.json):

| field | values | meaning |
|---|---|---|
| `kind` | `KINDS` | what sort of memory; `note` when the writer did not say, `axiom` for pinned identity |
| `source` | text | who wrote it: `tool:soul_add`, `seed:memories/MEMORY.md:12`, `import:<repo>@<sha>:<path>`, `hermes:sync_turn` |
| `source_ref` | text or null | session / message ids the memory came from |
| `writer` | text or null | the agent, user or process that wrote it |
| `first_seen_at`, `last_confirmed_at` | seconds | when it was first written, last confirmed |
| `confidence` | 0..1 | how sure the writer was |
| `importance` | 0..1 | how much it matters |
| `strength` | ≥ 0 | reinforcement at `last_confirmed_at` (see `effective_strength`) |
| `status` | `STATUSES` | active, or out of default recall: superseded, contradicted, archived |
| `superseded_by` | node id or null | the memory that replaced this one |
| `valid_from`, `valid_to` | seconds or null | when what it says was true |
| `privacy` | `PRIVACY` | normal, private, or secret-redacted |
| `scope` | text | whose memory it is: `""` shared by every user of the agent, else one user's, `platform:user` (memory/scopes.py) |

The sets are data: a new kind is one line here, and every check reads these tuples.
"""

from __future__ import annotations

import math

KINDS = (
    "note",  # the default: the writer did not classify it
    "axiom",  # pinned identity
    "episodic_event",
    "semantic_fact",
    "preference",
    "goal_or_commitment",
    "routine",
    "constraint",
    "collaborator",
    "project",
    "timeline_milestone",
    "intervention_outcome",
    "communication_preference",
    "tool_or_workflow_lesson",
)
STATUSES = ("active", "superseded", "contradicted", "archived")
PRIVACY = ("normal", "private", "secret-redacted")

# What each field may hold: a shape and, where the set is closed, the allowed values.
TEXT, OPTIONAL_TEXT, SECONDS, SHARE, STRENGTH = "text", "optional text", "seconds", "share", "strength"
FIELD_RULES: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "kind": (TEXT, KINDS),
    "source": (TEXT, None),
    "source_ref": (OPTIONAL_TEXT, None),
    "writer": (OPTIONAL_TEXT, None),
    "first_seen_at": (SECONDS, None),
    "last_confirmed_at": (SECONDS, None),
    "confidence": (SHARE, None),
    "importance": (SHARE, None),
    "strength": (STRENGTH, None),
    "status": (TEXT, STATUSES),
    "superseded_by": (OPTIONAL_TEXT, None),
    "valid_from": (SECONDS, None),
    "valid_to": (SECONDS, None),
    "privacy": (TEXT, PRIVACY),
    "scope": (TEXT, None),
}


def checked(name: str, value: object, where: str = "memory") -> object:
    """`value` for field `name` if allowed (ints become floats), else ValueError naming both."""
    shape, allowed = FIELD_RULES[name]
    if shape in (TEXT, OPTIONAL_TEXT):
        if value is None and shape == OPTIONAL_TEXT:
            return None
        if type(value) is not str:
            raise ValueError(f"{where}: {name} must be a string, got {_kind(value)}")
        if allowed is not None and value not in allowed:
            raise ValueError(f"{where}: {name} {value!r} is not one of {', '.join(allowed)}")
        return value
    if value is None and shape == SECONDS:
        return None
    if type(value) not in (float, int) or not math.isfinite(value):
        raise ValueError(f"{where}: {name} must be a finite number, got {value!r:.40}")
    number = float(value)
    if shape == SHARE and not 0.0 <= number <= 1.0:
        raise ValueError(f"{where}: {name} must be between 0 and 1, got {number!r}")
    if shape == STRENGTH and number < 0.0:
        raise ValueError(f"{where}: {name} must be 0 or more, got {number!r}")
    return number


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


# Defaults for a memory whose writer said nothing more (and for records of schema 1 and 2).
DEFAULT_KIND = "note"
DEFAULT_CONFIDENCE = 0.7
DEFAULT_IMPORTANCE = 0.5
DEFAULT_STRENGTH = 1.0
DEFAULT_STATUS = "active"
DEFAULT_PRIVACY = "normal"
DEFAULT_SCOPE = ""  # shared: what every memory of schema 3 and before is

# A memory the write-time scanner marked as reading like prompt injection carries the rules
# that fired in `metadata["flagged"]` (memory/write.py sets it). Such a memory is withheld
# from every prompt: its text reaches only a person at the shell (issue 28's policy).
FLAGGED = "flagged"


def flagged(metadata: dict) -> tuple[str, ...]:
    """The scanner rules a memory's metadata says it was flagged for (empty: not flagged)."""
    rules = metadata.get(FLAGGED) if metadata else None
    return tuple(rules) if isinstance(rules, (list, tuple)) else ()

# Reinforcement halves every STRENGTH_HALF_LIFE seconds without confirmation: 30 days by
# default, a setting (`SoulGraph.strength_half_life`, set by `SoulFile(strength_half_life=…)`
# and `python -m soulgraph.mcp --strength-half-life-days N`).
DAY = 86400.0
STRENGTH_HALF_LIFE = 30 * DAY


def effective_strength(strength: float, last_confirmed_at: float, now: float, *, pinned: bool = False,
                       half_life: float = STRENGTH_HALF_LIFE) -> float:
    """Reinforcement now: `strength · 2^(−(now − last_confirmed_at) / half_life)`.

    A confirmation adds 1 to what is left (`confirm`); a pinned memory never decays.
    """
    if pinned or now <= last_confirmed_at:
        return strength
    return strength * math.exp2(-(now - last_confirmed_at) / half_life)


def confirm(strength: float, last_confirmed_at: float, now: float, *, pinned: bool = False,
            half_life: float = STRENGTH_HALF_LIFE) -> float:
    """The stored strength after a confirmation (or a successful use) at `now`."""
    return effective_strength(strength, last_confirmed_at, now, pinned=pinned, half_life=half_life) + 1.0


def weaken(strength: float, last_confirmed_at: float, now: float, *, pinned: bool = False,
           half_life: float = STRENGTH_HALF_LIFE) -> float:
    """The stored strength after a memory was doubted: half of what is left."""
    return effective_strength(strength, last_confirmed_at, now, pinned=pinned, half_life=half_life) / 2.0
