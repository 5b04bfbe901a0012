"""The soul graph: an agent's long-term memory kept as a graph.

The engine (`SoulGraph`) is pure Python with an injectable clock; `store` keeps it in
`soul.json`; `mcp` serves it to an agent over MCP.
"""

from soulgraph.graph import SoulGraph, Node, SoulGraphError

__all__ = ["SoulGraph", "Node", "SoulGraphError"]
__version__ = "0.1.0"
