"""The soul graph engine: nodes, DAG edges, the memory record every node carries (record.py),
the splay tree, the word index. Pure: no I/O, time from an injectable clock."""

from soulgraph.engine.graph import CycleError, Hit, Node, SoulGraph, SoulGraphError, UnknownNode

__all__ = ["CycleError", "Hit", "Node", "SoulGraph", "SoulGraphError", "UnknownNode"]
