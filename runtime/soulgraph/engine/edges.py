"""One node's parents or children: a tuple while they are few, a set once they are many.

A set costs about 216 bytes however few it holds, and most nodes have one or two parents and
a few children: at 100,000 memories the two edge maps took 51 MB as sets, 12 MB as tuples.
A hub (a session with every turn as its child) holds thousands, where a tuple's linear `in`
would cost: from `SET_FROM` edges on they are a set. Both iterate, `len` and `in` alike; a
change goes through `joined` or `parted`, which return the container to store (a set is
changed in place and returned). Compare with `set(...)`, never with `==` against a set.
"""

from __future__ import annotations

from typing import Iterable, Union

Edges = Union[tuple[str, ...], set[str]]
NONE: tuple[str, ...] = ()
SET_FROM = 16  # edges from which a node's parents or children are a set


def packed(node_ids: Iterable[str]) -> Edges:
    """These ids without repeats, in first-seen order: a tuple, or a set when many."""
    unique = tuple(dict.fromkeys(node_ids))
    return set(unique) if len(unique) >= SET_FROM else unique


def packed_all(groups: list[tuple[str, ...]]) -> list[Edges]:
    """`packed` of each group, at C speed: the groups themselves when each is a tuple of
    distinct ids shorter than SET_FROM (what a clean file's load has)."""
    if (set(map(type, groups)) <= {tuple} and max(map(len, groups), default=0) < SET_FROM
            and sum(map(len, groups)) == sum(map(len, map(set, groups)))):
        return groups
    return list(map(packed, groups))


def joined(edges: Edges, node_id: str) -> Edges:
    """`edges` with `node_id` in it."""
    if type(edges) is set:
        edges.add(node_id)
        return edges
    if node_id in edges:
        return edges
    if len(edges) + 1 >= SET_FROM:
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
