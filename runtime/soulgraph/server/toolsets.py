"""The server's toolsets by name, and nothing else: importable by the installer, the check and
the operator's fleet without loading the MCP SDK.

Toolsets are opt-in; the default serves exactly the 13 tools of seed 000, so
`hermes mcp test soul` and the fleet's check keep counting 13.
"""

from __future__ import annotations

import argparse

GRAPH_TOOLS = (
    "soul_prime", "soul_related", "soul_query", "soul_hot", "soul_discover", "soul_by_tag",
    "soul_add", "soul_link", "soul_pin", "soul_splay", "soul_explore", "soul_promote", "soul_summary",
)
MEMORY_TOOLS = ("soul_update", "soul_merge", "soul_forget", "soul_history")
MARKDOWN_TOOLS = ("soul_status", "soul_init", "soul_ask", "soul_remember", "soul_reset")
TOOLSETS = {"graph": GRAPH_TOOLS, "memory": MEMORY_TOOLS, "markdown": MARKDOWN_TOOLS}
DEFAULT_TOOLSETS = ("graph",)


def tool_names(toolsets: tuple[str, ...] = DEFAULT_TOOLSETS) -> tuple[str, ...]:
    return tuple(name for toolset in toolsets for name in TOOLSETS[toolset])


def problem(names: tuple[str, ...]) -> str | None:
    """Why `names` is not a valid choice (None when it is): graph always, others known."""
    unknown = [name for name in names if name not in TOOLSETS]
    if unknown:
        return f"unknown toolset {', '.join(unknown)} (toolsets: {', '.join(TOOLSETS)})"
    if "graph" not in names:
        return f"the graph toolset is always served (toolsets: {', '.join(TOOLSETS)})"
    return None


def parse_toolsets(text: str) -> tuple[str, ...]:
    """`--toolsets graph,memory` for argparse."""
    names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    wrong = problem(names)
    if wrong:
        raise argparse.ArgumentTypeError(wrong)
    return names
