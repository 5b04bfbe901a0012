"""The MCP server: the 13 soul graph tools over stdio (`python -m soulgraph.mcp`)."""

from soulgraph.server.app import DEFAULT_TOOLSETS, TOOL_NAMES, TOOLSETS, build_server, main, tool_names

__all__ = ["DEFAULT_TOOLSETS", "TOOL_NAMES", "TOOLSETS", "build_server", "main", "tool_names"]
