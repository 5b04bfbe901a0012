"""The Hermes skill that tells the agent the soul graph tools exist and when to use them.

Installed as `skills/soul-graph/SKILL.md` in the Hermes home. The frontmatter follows
hermes-agent 0.19: `name` (<= 64 chars), `description` (<= 1024), and
`metadata.hermes.{tags, requires_toolsets}`; Hermes puts an MCP server's tools in the
toolset `mcp-<server>` and names them `mcp__<server>__<tool>`, so with the server
registered as `soul` the skill shows only when `mcp-soul` is loaded.

`metadata.soulgraph.generated_by` marks the file as ours: a SKILL.md without it was
written by someone else and is never replaced.
"""

from __future__ import annotations

import re

SKILL_NAME = "soul-graph"
SKILL_RELPATH = f"skills/{SKILL_NAME}/SKILL.md"
GENERATED_BY = "soulgraph.install"
_MARKER = re.compile(r"^\s*generated_by:\s*['\"]?soulgraph\.install['\"]?\s*$", re.MULTILINE)
_NAME = re.compile(r"^name:\s*['\"]?([^'\"\n#]+?)['\"]?\s*(?:#.*)?$", re.MULTILINE)


def frontmatter(text: str) -> str:
    """The YAML between the opening `---` and the closing one ('' when there is none)."""
    text = text.lstrip("\ufeff")
    if not text.startswith("---"):
        return ""
    end = re.search(r"\n---\s*(\n|$)", text[3:])
    return text[3:end.start() + 3] if end else ""


def is_ours(text: str) -> bool:
    return bool(_MARKER.search(frontmatter(text)))


def skill_name(text: str) -> str | None:
    found = _NAME.search(frontmatter(text))
    return found.group(1).strip() if found else None


def skill_text(server: str = "soul") -> str:
    tool = f"mcp__{server}__"
    return f"""---
name: {SKILL_NAME}
description: Long-term memory kept as a graph (the soul graph), served by the MCP server "{server}". Use it to recall what earlier work a task builds on, to record new memories with their lineage, to pin axioms, and to try out hypotheses before accepting them.
version: 1.0.0
metadata:
  hermes:
    tags: [memory, soul-graph, mcp, long-term-memory]
    requires_toolsets: [mcp-{server}]
  soulgraph:
    generated_by: {GENERATED_BY}
    note: Written by python -m soulgraph.install and replaced when it changes. Remove generated_by to keep your own edits.
---

# Soul graph: long-term memory as a graph

Your long-term memory lives in a graph of nodes (memories, decisions, beliefs) joined by
edges that say "this was built on that". Your persona (SOUL.md) is in it as pinned axioms,
and your MEMORY.md / USER.md entries were seeded into it, each under its section. The
tools are `{tool}<tool>`; every node has an id such as `n42`.

## When to use which tool

- **Once at the start of a session: `soul_prime`**, with `context` set to what the user
  asked for. It returns your axioms, what you have been doing lately, and the memory that
  best matches the task with what it was built on. Do not call it again in the session.
- **Before building on earlier work: `soul_related`** with a short description of the
  task. It finds matching memories and follows their edges to the older decisions they
  rest on. Prefer it to `soul_query`, which is plain search (use `tag` to narrow it).
- **When you learn or decide something worth keeping: `soul_add`, then link it.** Pass
  the ids it was built on as `parents`, or call `soul_link(parent_id, child_id)` after
  the fact. Lineage is what makes memories findable later: an unlinked node is only found
  by its words. Use tags such as `lesson`, `decision` or `project:<name>`.
- **For a rule that must never fade: `soul_pin`.** Pinned nodes always come first in
  `soul_hot` and `soul_prime`. Pin sparingly: axioms, standing user instructions.
- **For a guess you have not confirmed: `soul_explore`**, which keeps the hypothesis in a
  separate exploration branch and shows what it relates to. When it proves right,
  `soul_promote` moves that one node into the graph; otherwise leave it.
- **When you rely on a memory: `soul_splay`** marks it used, so it stays near the top.
- **To look around:** `soul_hot` (what you have been doing), `soul_discover` (what was
  built on a node), `soul_by_tag` (every node with a tag), `soul_summary` (counts).

## Rules

- Keep each node to one fact or decision, in plain words; link instead of repeating.
- Never store secrets (keys, passwords, tokens) in the graph.
- A refused call (unknown id, an edge that would close a cycle) changes nothing; read
  the error and fix the call.
"""
