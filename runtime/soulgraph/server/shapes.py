"""What each tool answers, field by field: the tools' return annotations, so the SDK publishes
them as `outputSchema` and checks every structured answer against them.

(typing_extensions' TypedDict: pydantic needs it on Python < 3.12. A key left out here would
be dropped from the answer, so every key a tool returns is listed.)
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from typing_extensions import NotRequired, TypedDict


class Withheld(TypedDict):
    """Why a memory's text is not shown (memory/flagged.py): it reads like prompt injection."""

    reason: str  # "reads like prompt injection"
    rules: list[str]  # the scanner rules it matched


class Changed(TypedDict):
    """A value a later memory changed: `old` as this memory says it, `new` as memory `by` does."""

    old: str
    new: str
    by: str


class Brief(TypedDict):
    """A node in a list of results. A flagged memory is withheld: `content` is a fixed marker,
    `tags` empty, and `withheld` says why (`flagged` instead, with the text, on a server
    started with --show-flagged)."""

    id: str
    content: str
    tags: list[str]
    created_at: str  # ISO 8601, UTC
    parents: list[str]
    pinned: bool
    kind: NotRequired[str]  # a flagged memory's kind
    withheld: NotRequired[Withheld]
    flagged: NotRequired[Withheld]
    score: NotRequired[float]  # search results: how well it matched
    via: NotRequired[Optional[str]]  # search results: why it is here when not by its own words
    depth: NotRequired[int]  # walks: edges away from where the walk started
    relation: NotRequired[str]  # prime's walk: ancestor or descendant of the focus
    updated: NotRequired[list[Changed]]  # values later memories changed (the newest three), and by which


class View(TypedDict):
    """A node on its own (the answer of a write), with its bookkeeping. Withheld as in `Brief`
    when flagged, and then without metadata."""

    id: str
    content: str
    tags: list[str]
    pinned: bool
    access_count: int
    created_at: str
    last_accessed: str
    parents: list[str]
    children: list[str]
    kind: NotRequired[str]  # when not the default, note
    scope: NotRequired[str]  # one user's memory: platform:user (absent: shared)
    metadata: NotRequired[dict[str, Any]]  # a flagged memory merged into this one: its content withheld
    withheld: NotRequired[Withheld]
    flagged: NotRequired[Withheld]
    score: NotRequired[float]
    warnings: NotRequired[list[str]]
    status: NotRequired[str]  # soul_update: the memory's status after the change; soul_promote: discarded
    strength: NotRequired[float]
    superseded_by: NotRequired[str]
    merged: NotRequired[str]  # soul_merge: the id that went into this one


class Results(TypedDict):
    results: list[Brief]


class Primed(TypedDict):
    snapshot: str  # compact text of what to keep in mind, within max_chars
    hot: list[Brief]
    focus: Optional[View]  # the memory that best matches `context`
    walk: list[Brief]


# "from" is a Python keyword: the functional form.
Walk = TypedDict("Walk", {"from": str, "results": list[Brief]})


class Tagged(TypedDict):
    tag: str
    total: int  # every node with the tag, on all pages
    results: list[Brief]
    next_cursor: Optional[str]  # pass as `cursor` for the next page; null on the last


class Linked(TypedDict):
    parent: str
    child: str
    linked: bool
    already_linked: bool


class Hypothesis(TypedDict):
    id: str
    content: str  # withheld as in `Brief` when flagged
    tags: list[str]
    parents: list[str]
    withheld: NotRequired[Withheld]
    flagged: NotRequired[Withheld]


class Explored(TypedDict):
    hypothesis: Hypothesis
    related: list[Brief]
    warnings: NotRequired[list[str]]


class Search(TypedDict):
    mode: Literal["hybrid", "lexical"]  # hybrid: words, links and vectors; lexical: words and links
    model: NotRequired[str]  # hybrid: the embedding model's version stamp
    vectors: NotRequired[int]  # hybrid: memories with a vector
    reason: NotRequired[str]  # lexical: why (no `embed` extra, loading, switched off)


class Scope(TypedDict):
    serves: str  # "shared", or the one user's scope besides the shared memories
    users_not_served: int  # other users with memories in this soul the server does not show
    note: str


class WithheldCount(TypedDict):
    memories: int  # flagged memories this server serves: shown withheld, never in prime or the snapshot
    reason: str
    operator: str  # the command that shows an operator their text


class Scanner(TypedDict):
    """What the write-time scanner of this install is (memory/scanner: `status()`)."""

    detector: str  # "rules and a linear model", or "rules only: …" and why
    rules: int
    confusables: str  # where the look-alike letters it folds come from, or why none
    threshold: NotRequired[float]
    features: NotRequired[int]
    version: NotRequired[str]


class Summary(TypedDict):
    nodes: int
    edges: int
    pinned: int
    tags: dict[str, int]  # tag -> how many nodes, most used first (a flagged memory's tags not counted)
    hypotheses: int  # open ones, in the exploration branch
    hot: list[Brief]
    open_hypotheses: list[Hypothesis]  # newest first, up to 50
    soul_file: str
    search: Search
    scope: Scope
    scanner: Scanner
    withheld: NotRequired[WithheldCount]


class Forgotten(TypedDict):
    forgotten: str
    reason: str
    scrubbed: NotRequired[list[str]]  # the markdown files rewritten without the note's entry
    warnings: NotRequired[list[str]]


class History(TypedDict):
    node: str
    entries: list[dict[str, Any]]  # {at, action, node, writer, by?, reason?, scope?, before, after}


class MarkdownAnswer(TypedDict):
    """The markdown toolset's answers (one shape: the fields present depend on the tool)."""

    status: Literal["success", "error"]
    message: NotRequired[str]  # with status error: what went wrong
    soul_path: NotRequired[str]
    memory_path: NotRequired[str]
    soul_exists: NotRequired[bool]
    soul_size_bytes: NotRequired[int]
    memory_exists: NotRequired[bool]
    memory_size_bytes: NotRequired[int]
    memory_format: NotRequired[str]
    memory_entries: NotRequired[int]
    memory_chars_used: NotRequired[int]
    memory_budget_chars: NotRequired[int]
    memory_remaining_chars: NotRequired[int]
    created: NotRequired[list[str]]
    skipped: NotRequired[list[str]]
    node_id: NotRequired[str]
    warnings: NotRequired[list[str]]
    note: NotRequired[str]
    response: NotRequired[str]
    remembered: NotRequired[bool]
