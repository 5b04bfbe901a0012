"""The MCP server: the 13 soul graph tools over stdio (`python -m soulgraph.mcp`).

The server (and with it the MCP SDK, about a second to import) is loaded only when asked for:
the installer and the memory service import `soulgraph.server.toolsets`, which needs none of it.
"""

from soulgraph.server.toolsets import DEFAULT_TOOLSETS, GRAPH_TOOLS as TOOL_NAMES, TOOLSETS, tool_names

__all__ = ["DEFAULT_TOOLSETS", "TOOL_NAMES", "TOOLSETS", "build_server", "main", "tool_names"]


def __getattr__(name: str):
    if name in ("build_server", "main"):
        from soulgraph.server import app

        return getattr(app, name)
    raise AttributeError(name)
