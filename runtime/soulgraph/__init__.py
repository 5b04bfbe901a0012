"""The soul graph: an agent's long-term memory kept as a graph.

The package is laid out by job: `engine` (the graph, pure), `store` (soul.json), `server`
(the MCP server), `hermes` (Hermes' home, config, seeding, the installer), `eval` (the
recall harness, operator-side). The modules at this level are the commands:
`python -m soulgraph.mcp`, `.install`, `.seed`, `.check`.
"""

__all__ = ["SoulGraph", "Node", "SoulGraphError"]
__version__ = "0.1.0"


def __getattr__(name: str):
    # Imported on first use: the commands that do not need the graph (the installer on a
    # no-change deploy, the host lock) start without it.
    if name in __all__:
        from soulgraph.engine import graph

        return getattr(graph, name)
    raise AttributeError(f"module 'soulgraph' has no attribute {name!r}")
