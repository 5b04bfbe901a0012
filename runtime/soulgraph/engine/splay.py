"""A splay tree of (key, node id) pairs: the graph's recency order.

Top-down splaying (Sleator and Tarjan, 1985), written iteratively so that the long
left spines a time-ordered workload builds (every new node is the new maximum)
never hit Python's recursion limit. Keys are compared as (key, id) tuples, so two
nodes with the same key still have a fixed order.
"""

from __future__ import annotations

from collections import deque
from itertools import repeat
from typing import Iterator, Sequence


class _Entry:
    __slots__ = ("item", "left", "right")

    def __init__(self, item: tuple[float, str]):
        self.item = item
        self.left: _Entry | None = None
        self.right: _Entry | None = None


class SplayTree:
    """An ordered set of (key, id) pairs with amortised O(log n) insert and remove."""

    def __init__(self) -> None:
        self._root: _Entry | None = None
        self._size = 0

    @classmethod
    def from_sorted(cls, items: Sequence[tuple[float, str]]) -> "SplayTree":
        """A tree of `items`, which must be strictly ascending, built balanced in one pass.

        Loading a graph inserted its nodes one by one: n splays of a growing tree. Sorted
        keys give the tree directly: a complete binary search tree, laid out by in-order
        position p (1-based) in a perfect tree of 2**k - 1 positions, where the node at
        p = odd * 2**h has children at p -+ 2**(h-1). The n items take every internal
        position and the leftmost leaves; the links are set a level at a time by slicing,
        so no Python code runs per item. Depth: the bit length of n.
        """
        tree = cls()
        n = len(items)
        if not n:
            return tree
        entries = list(map(_Entry, items))
        k = n.bit_length()
        top = (1 << k) - 1  # positions 1..top of the perfect tree
        leaves = n - ((1 << (k - 1)) - 1)  # leaves in use, the leftmost ones (1 <= leaves <= 2**(k-1))
        at: list[_Entry | None] = [None] * (top + 1)  # position -> entry
        at[1:2 * leaves] = entries[:2 * leaves - 1]  # the used leaves and the positions between them
        at[2 * leaves:top:2] = entries[2 * leaves - 1:]  # internal positions to the right of them
        for height in range(1, k):
            step, half = 1 << (height + 1), 1 << (height - 1)
            parents = at[1 << height::step]
            deque(map(setattr, parents, repeat("left"), at[(1 << height) - half::step]), maxlen=0)
            deque(map(setattr, parents, repeat("right"), at[(1 << height) + half::step]), maxlen=0)
        tree._root = at[1 << (k - 1)]
        tree._size = n
        return tree

    def __len__(self) -> int:
        return self._size

    @property
    def root(self) -> tuple[float, str] | None:
        return self._root.item if self._root else None

    def _splay(self, item: tuple[float, str]) -> None:
        """Bring `item`, or the last entry on its search path, to the root."""
        root = self._root
        if root is None:
            return
        header = _Entry(item)  # its left/right collect the right/left trees
        left_max = right_min = header
        while True:
            if item < root.item:
                if root.left is None:
                    break
                if item < root.left.item:  # zig-zig: rotate right
                    child = root.left
                    root.left = child.right
                    child.right = root
                    root = child
                    if root.left is None:
                        break
                right_min.left = root  # link right
                right_min = root
                root = root.left
            elif item > root.item:
                if root.right is None:
                    break
                if item > root.right.item:  # zig-zig: rotate left
                    child = root.right
                    root.right = child.left
                    child.left = root
                    root = child
                    if root.right is None:
                        break
                left_max.right = root  # link left
                left_max = root
                root = root.right
            else:
                break
        left_max.right = root.left
        right_min.left = root.right
        root.left = header.right
        root.right = header.left
        self._root = root

    def insert(self, item: tuple[float, str]) -> None:
        entry = _Entry(item)
        if self._root is None:
            self._root = entry
            self._size = 1
            return
        self._splay(item)
        root = self._root
        if item == root.item:
            return
        if item < root.item:
            entry.left, entry.right = root.left, root
            root.left = None
        else:
            entry.right, entry.left = root.right, root
            root.right = None
        self._root = entry
        self._size += 1

    def remove(self, item: tuple[float, str]) -> None:
        if self._root is None:
            raise KeyError(item)
        self._splay(item)
        root = self._root
        if root.item != item:
            raise KeyError(item)
        if root.left is None:
            self._root = root.right
        else:
            right = root.right
            self._root = root.left
            self._splay(item)  # the left tree's maximum comes up, with no right child
            self._root.right = right
        self._size -= 1

    def touch(self, item: tuple[float, str]) -> None:
        """Splay an existing item to the root: a node that was just used."""
        self._splay(item)

    def descending(self) -> Iterator[tuple[float, str]]:
        """Items from the largest key down (reverse in-order), lazily."""
        stack: list[_Entry] = []
        entry = self._root
        while stack or entry is not None:
            while entry is not None:
                stack.append(entry)
                entry = entry.right
            entry = stack.pop()
            yield entry.item
            entry = entry.left

    def ascending(self) -> Iterator[tuple[float, str]]:
        stack: list[_Entry] = []
        entry = self._root
        while stack or entry is not None:
            while entry is not None:
                stack.append(entry)
                entry = entry.left
            entry = stack.pop()
            yield entry.item
            entry = entry.right
