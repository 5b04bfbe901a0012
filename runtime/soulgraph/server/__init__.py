"""The MCP server: the 13 soul graph tools over stdio (`python -m soulgraph.mcp`)."""

from soulgraph.server.app import TOOL_NAMES, build_server, main

__all__ = ["TOOL_NAMES", "build_server", "main"]
