"""The soul graph: an agent's long-term memory kept as a graph.

The package is laid out by job: `engine` (the graph, pure), `store` (soul.json), `server`
(the MCP server), `hermes` (Hermes' home, config, seeding, the installer), `eval` (the
recall harness, operator-side). The modules at this level are the commands:
`python -m soulgraph.mcp`, `.install`, `.seed`, `.check`.
"""

from soulgraph.engine.graph import SoulGraph, Node, SoulGraphError

__all__ = ["SoulGraph", "Node", "SoulGraphError"]
__version__ = "0.1.0"
