"""A group of node ids: a tuple while they are few, a set once they are many.

A set costs about 216 bytes however few it holds, and most nodes have one or two parents and
a few children: at 100,000 memories the two edge maps took 51 MB as sets, 12 MB as tuples.
A hub (a session with every turn as its child) holds thousands, where a tuple's linear `in`
would cost: from `SET_FROM` edges on they are a set. Both iterate, `len` and `in` alike; a
change goes through `joined` or `parted`, which return the container to store (a set is
changed in place and returned). Compare with `set(...)`, never with `==` against a set.

The word index keeps a word's memories the same way (`engine/index.py`), with its own
`set_from`: it never asks a posting `in`, so a tuple serves it far longer.
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import ge, ne, or_
from typing import Iterable, Union

Edges = Union[tuple[str, ...], set[str]]
NONE: tuple[str, ...] = ()
SET_FROM = 16  # edges from which a node's parents or children are a set


def packed(node_ids: Iterable[str], set_from: int = SET_FROM) -> Edges:
    """These ids without repeats, in first-seen order: a tuple, or a set when `set_from` or more."""
    unique = tuple(dict.fromkeys(node_ids))
    return set(unique) if len(unique) >= set_from else unique


def packed_all(groups: list[tuple[str, ...]]) -> list[Edges]:
    """`packed` of each group, at C speed for the groups that are already tuples of distinct
    ids shorter than SET_FROM (nearly all, in a clean file); the others one by one."""
    if not set(map(type, groups)) <= {tuple}:
        return list(map(packed, groups))
    sizes = list(map(len, groups))
    odd = map(or_, map(ne, sizes, map(len, map(set, groups))), map(ge, sizes, repeat(SET_FROM)))
    result = list(groups)
    for at in compress(range(len(groups)), odd):
        result[at] = packed(groups[at])
    return result


def joined(edges: Edges, node_id: str, set_from: int = SET_FROM) -> Edges:
    """`edges` with `node_id` in it."""
    if type(edges) is set:
        edges.add(node_id)
        return edges
    if node_id in edges:
        return edges
    if len(edges) + 1 >= set_from:
        return {*edges, node_id}
    return (*edges, node_id)


def parted(edges: Edges, node_id: str) -> Edges:
    """`edges` without `node_id` (a set stays a set: a hub that shrinks is likely to grow again)."""
    if type(edges) is set:
        edges.discard(node_id)
        return edges
    if node_id not in edges:
        return edges
    return tuple(other for other in edges if other != node_id)
