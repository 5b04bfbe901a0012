"""Building a whole graph from stored node records at once: a soul file's load, fast.

Inserting 100,000 nodes one by one (what loading did) costs seconds: a splay per node,
a Python loop per word of every text, a set per tag per node. `load_graph` builds the
same graph (every structure equal to the one-by-one result, down to the order of each
node's edges and the splay tree's root; the word index's sets hold the same members, sized
once) from columns of the records, with the per-node and
per-word work in C loops (`map`, `zip`, slicing) rather than Python bytecode:

- the records are checked column by column (`_clean_columns`); only a file that fails
  that quick check is read record by record, by `parse_node_record`, which says
  exactly what is wrong and where;
- the splay tree is built balanced from the sorted keys (`SplayTree.from_sorted`);
- the word index is filled by `InvertedIndex.add_many`;
- tags and pins are filled with `map(set.add, ...)`, parents and children as tuples (engine/edges.py);
- acyclicity is checked by Kahn's algorithm only when some edge points backwards in the
  file's order (one pass of comparisons otherwise: edges that all point forwards in some
  order cannot close a cycle).

A large load can be kept for the next (`engine/load_image.py`): `load_graph`'s `on_indexed`
is handed the checked columns and the built index, and `load_graph_from_image` builds the same
graph from them again, with no parse, no check and no index to build.

The garbage collector is paused meanwhile (`paused_gc`, which a store should also put
around `json.loads` and its `gc.freeze()`): a load allocates about a million containers,
and every collection it would trigger walks all of them again.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import gc
import math
import time
from array import array
from collections import defaultdict, deque
from itertools import accumulate, chain, compress, repeat
from operator import add, attrgetter, is_not, itemgetter, lt, truediv
from typing import Any, Callable, Iterable, Iterator, Mapping

from soulgraph.engine import edges
from soulgraph.engine import record as memory_record
from soulgraph.engine.graph import DAY, DEFAULT_RECENCY_WEIGHT, MEMORY_DEFAULTS, Clock, Node, SoulGraph
from soulgraph.engine import load_image
from soulgraph.engine.index import InvertedIndex
from soulgraph.engine.splay import SplayTree

# The columns are passed to Node positionally (`map(Node, ...)`): refuse to run against a
# Node whose fields moved, rather than build nodes with swapped fields.
_NODE_FIELDS = ("id", "content", "tags", "created_at", "last_accessed", "access_count", "pinned", "metadata")
assert tuple(f.name for f in dataclasses.fields(Node))[:len(_NODE_FIELDS)] == _NODE_FIELDS, \
    "Node's fields changed: update load.py"

# The memory record's fields (each optional in a record: absent means its default).
_MEMORY_RULES = memory_record.FIELD_RULES
_TEXT, _OPTIONAL_TEXT, _SECONDS, _SHARE, _STRENGTH = (memory_record.TEXT, memory_record.OPTIONAL_TEXT,
                                                      memory_record.SECONDS, memory_record.SHARE, memory_record.STRENGTH)
assert tuple(_MEMORY_RULES) == tuple(name for name, _ in MEMORY_DEFAULTS), "the memory fields changed: update load.py"
_MISSING = object()

_RECORD_FIELDS = (*_NODE_FIELDS, "parents")
# What a load image keeps of the columns (`engine/load_image.py`): the record's fields in order,
# and the mark of a memory field a record lacks.
RECORD_FIELDS, MISSING = _RECORD_FIELDS, _MISSING
# access_count goes through log1p and float arithmetic; far beyond any real count, and
# small enough that neither overflows.
_MAX_ACCESS_COUNT = 2**63 - 1


# ----------------------------------------------------------------- one record, strictly
def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _time(record: dict[str, Any], field: str, default: float, where: str) -> float:
    value = record.get(field, default)
    if type(value) not in (float, int):  # bool is an int subclass, never a time
        raise ValueError(f"{where}: {field} must be a number of seconds, got {_kind(value)}")
    try:
        seconds = float(value)
    except OverflowError:
        seconds = math.inf
    if not math.isfinite(seconds):
        raise ValueError(f"{where}: {field} must be a finite number, got {value!r}")
    return seconds


def _strings(record: dict[str, Any], field: str, where: str) -> list[str]:
    value = record.get(field, [])
    if type(value) is not list:
        raise ValueError(f"{where}: {field} must be a list of strings, got {_kind(value)}")
    for item in value:
        if type(item) is not str:
            raise ValueError(f"{where}: {field} must be a list of strings, got a {_kind(item)} in it")
    return list(value)


def parse_node_record(record: object, where: str) -> tuple[Node, list[str]]:
    """One node record as soul.json stores it, checked strictly: (node, parent ids).

    Raises ValueError naming `where` (say "node 17") and the field. Missing optional
    fields take `Node.from_dict`'s defaults (last_accessed: created_at); a field of the
    wrong type is refused rather than coerced (`"tags": "lesson"` is not ["l", "e", …]).
    """
    if type(record) is not dict:
        raise ValueError(f"{where}: a node record must be an object, got {_kind(record)}")
    if "id" not in record:
        raise ValueError(f"{where}: id is missing")
    node_id = record["id"]
    if type(node_id) is not str or not node_id:
        raise ValueError(f"{where}: id must be a non-empty string, got {node_id!r}")
    if "content" not in record:
        raise ValueError(f"{where}: content is missing")
    content = record["content"]
    if type(content) is not str:
        raise ValueError(f"{where}: content must be a string, got {_kind(content)}")
    tags = _strings(record, "tags", where)
    created_at = _time(record, "created_at", 0.0, where)
    last_accessed = _time(record, "last_accessed", created_at, where)
    access_count = record.get("access_count", 0)
    if type(access_count) is not int or not 0 <= access_count <= _MAX_ACCESS_COUNT:
        raise ValueError(f"{where}: access_count must be an integer from 0 to 2**63 - 1, got {access_count!r}")
    pinned = record.get("pinned", False)
    if type(pinned) is not bool:
        raise ValueError(f"{where}: pinned must be true or false, got {pinned!r}")
    metadata = record.get("metadata", {})
    if type(metadata) is not dict:
        raise ValueError(f"{where}: metadata must be an object, got {_kind(metadata)}")
    parents = _strings(record, "parents", where)
    node = Node(node_id, content, tags, created_at, last_accessed, access_count, pinned, dict(metadata))
    for name in _MEMORY_RULES:
        value = record.get(name, _MISSING)
        if value is not _MISSING:
            setattr(node, name, memory_record.checked(name, value, where))
    return node, parents


def _where(position: int, record: object, kind: str = "node") -> str:
    """How an error names a record: its position in the list, and its id when it has one."""
    node_id = record.get("id") if type(record) is dict else None
    return f"{kind} {position} (id {node_id!r})" if type(node_id) is str and node_id else f"{kind} {position}"


# ----------------------------------------------------------------- all records, by columns
class _Columns:
    """The records' fields as parallel lists (the node's values: copies, floats for times)."""

    __slots__ = (*_RECORD_FIELDS, "memory")

    def __init__(self, *columns: list[Any]) -> None:
        for name, column in zip(_RECORD_FIELDS, columns):
            setattr(self, name, column)
        self.memory: dict[str, list[Any]] = {}  # memory field -> column, for the fields any record has


def _types(column: Any) -> set[type]:
    return set(map(type, column))


def _finite_times(column: tuple[Any, ...], kinds: set[type]) -> list[float] | None:
    """The column as floats when every value is a finite int or float, else None."""
    if not kinds <= {float, int}:
        return None
    try:
        # An inf or nan anywhere makes the sum non-finite (so may a sum of huge values:
        # then the record-by-record path decides).
        if not math.isfinite(sum(column)):
            return None
    except OverflowError:
        return None
    return list(column) if kinds == {float} else list(map(float, column))


# The field types of a clean record, in _RECORD_FIELDS order (times may also be ints).
_CLEAN_TYPES = (str, str, list, float, float, int, bool, dict, list)


def _clean_columns(records: list[Any], copied: bool = True) -> _Columns | None:
    """The columns when every record is a complete, well-typed object; None otherwise
    (some field missing or wrong: the record-by-record path finds out which). Parent ids
    are checked by `_fill`, which looks every one of them up anyway. `copied`: each tag list
    and metadata dict a copy of the record's; False when `_own_values` makes new ones anyway."""
    if _types(records) != {dict}:
        return None
    try:
        rows = list(map(itemgetter(*_RECORD_FIELDS), records))
    except KeyError:
        return None
    # Each row's field types as one tuple: a clean file has one or two distinct tuples.
    row_types = set(map(tuple, map(map, repeat(type), rows)))
    kinds = [{types[field] for types in row_types} for field in range(len(_RECORD_FIELDS))]
    if any(kinds[field] != {kind} for field, kind in enumerate(_CLEAN_TYPES) if kind is not float):
        return None
    ids, contents, tags, created, accessed, counts, pins, metas, parents = zip(*rows)
    if "" in ids or not _types(chain.from_iterable(tags)) <= {str}:
        return None
    if min(counts) < 0 or max(counts) > _MAX_ACCESS_COUNT:
        return None
    created, accessed = _finite_times(created, kinds[3]), _finite_times(accessed, kinds[4])
    if created is None or accessed is None:
        return None
    memory = _memory_columns(records)
    if memory is None:
        return None
    if copied:
        tags, metas = map(list, tags), map(dict, metas)
    columns = _Columns(_compact(ids), list(contents), list(tags), created, accessed, list(counts),
                       list(pins), list(metas), list(parents))
    columns.memory = memory
    return columns


def _memory_columns(records: list[dict[str, Any]]) -> dict[str, list[Any]] | None:
    """The memory fields present in any record, as columns (absent entries: _MISSING);
    None when a value is not allowed (the record-by-record path then says which)."""
    columns: dict[str, list[Any]] = {}
    # Most files use a few of the fields (none, before schema 3): find which, in one pass.
    present_names = set(chain.from_iterable(map(dict.keys, records))) & _MEMORY_RULES.keys()
    for name, rule in _MEMORY_RULES.items():
        if name not in present_names:
            continue
        column = list(map(dict.get, records, repeat(name), repeat(_MISSING)))
        present = set(map(type, column)) - {object}
        if not present:
            continue
        shape, allowed = rule
        values = [value for value in column if value is not _MISSING]
        if shape in (_TEXT, _OPTIONAL_TEXT):
            if not present <= ({str, type(None)} if shape == _OPTIONAL_TEXT else {str}):
                return None
            if allowed is not None and not set(values) <= set(allowed):
                return None
        else:
            numbers = [value for value in values if value is not None]
            if not present <= ({float, int, type(None)} if shape == _SECONDS else {float, int}):
                return None
            if numbers and not math.isfinite(sum(numbers)):
                return None
            if shape == _SHARE and numbers and not (min(numbers) >= 0.0 and max(numbers) <= 1.0):
                return None
            if shape == _STRENGTH and numbers and min(numbers) < 0.0:
                return None
            if int in present:
                column = [float(value) if type(value) is int else value for value in column]
        columns[name] = column
    return columns


def _own_values(c: _Columns) -> None:
    """Replace every value the graph will keep with a new object of its own, allocated after
    the parse, one after another. Python's allocator gives memory back in whole arenas (1 MB):
    a single parsed string or float kept from each would hold the whole parse's memory
    (about 60 MB at 100,000 memories) in use once the records are gone. Texts seen many times
    (tags, kinds, writers) become one object each, as interning would make them."""
    c.content = _compact(c.content)
    c.created_at, c.last_accessed = _new_floats(c.created_at), _new_floats(c.last_accessed)
    c.access_count = array("q", c.access_count).tolist()
    tags = list(chain.from_iterable(c.tags))
    c.tags = _regrouped(list(map(_one_each(tags).__getitem__, tags)), c.tags)
    parents = list(chain.from_iterable(c.parents))
    try:
        own_id = dict(zip(c.id, c.id)).get
        # A parent that is not a node stays as it is: `_fill` refuses it and names it.
        c.parents = _regrouped(tuple(map(own_id, parents, parents)), c.parents)  # tuples: as the graph keeps them
    except TypeError:  # a parent that is not even a string: `_fill` names that too
        pass
    c.metadata = [copy.deepcopy(metadata) if metadata else {} for metadata in c.metadata]
    for name, column in c.memory.items():
        if str in set(map(type, column)):
            c.memory[name] = list(map(_one_each(value for value in column if type(value) is str).get, column, column))
        else:  # numbers (or None, or absent): floats copied bit for bit
            c.memory[name] = [_new_float(value) if type(value) is float else value for value in column]


def _one_each(texts: Iterable[str]) -> dict[str, str]:
    """Each distinct text -> one new copy of it."""
    return {text: _new_text(text) for text in set(texts)}


def _regrouped(flat: list[Any] | tuple[Any, ...], groups: list[Any]) -> list[Any]:
    """`flat` cut into pieces (lists, or tuples from a tuple) as long as the `groups` it was
    chained from."""
    ends = list(accumulate(map(len, groups)))
    return list(map(flat.__getitem__, map(slice, [0, *ends[:-1]], ends)))


def _new_text(text: str) -> str:
    return (text + "\0")[:-1]  # a new object: slicing a whole string returns the same one


def _new_floats(values: list[float]) -> list[float]:
    return array("d", values).tolist()


def _new_float(value: float) -> float:
    return array("d", (value,))[0]


def _compact(ids: tuple[str, ...] | list[str]) -> list[str]:
    """The same ids as new strings, allocated one after another. JSON parsing leaves each
    id between the record's other values; every posting and edge set hashes its members'
    ids (the hash is cached in the string), so ids packed together make the index build
    and later searches touch far less memory."""
    packed = "\0".join(ids).split("\0")
    return packed if len(packed) == len(ids) else list(ids)  # an id with a NUL in it: keep them as they are


def _checked_columns(records: list[Any]) -> _Columns:
    """The columns, record by record through `parse_node_record` (raises on the first bad one)."""
    nodes: list[Node] = []
    parents: list[list[str]] = []
    for position, record in enumerate(records):
        node, node_parents = parse_node_record(record, _where(position, record))
        nodes.append(node)
        parents.append(node_parents)
    columns = _Columns(*([getattr(node, name) for node in nodes] for name in _NODE_FIELDS), parents)
    columns.memory = {name: [getattr(node, name) for node in nodes] for name, _default in MEMORY_DEFAULTS}
    return columns


# ----------------------------------------------------------------- the graph
@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection inside the block (it is re-enabled after, if it was on).

    Building a big graph allocates about a million containers, and each collection they
    trigger walks all those built so far: at 100,000 nodes `load_graph` takes about twice
    as long with collections on, and `json.loads` of the file a third longer. Nothing
    built is garbage. On leaving, everything built is still in the young generation, so
    the next allocation runs one collection over all of it (about 0.5 s at 100,000 nodes
    on a slow machine): a store that keeps the graph should `gc.freeze()` before leaving
    its own `with paused_gc():` around `json.loads` and `load_graph` (nested blocks
    re-enable nothing).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_graph(records: list[Any], *, next_id: object, exploration: object, clock: Clock = time.time,
               recency_weight: float = DEFAULT_RECENCY_WEIGHT, consume: bool = False,
               on_indexed: Callable[[_Columns, InvertedIndex], None] | None = None) -> SoulGraph:
    """The graph of a soul file's node records (in file order), its next_id and its
    exploration branch ({"nodes": [records]} or None), as inserting the nodes one by one
    and then their edges would build it, with nothing marked changed.

    Raises ValueError saying what is wrong: a bad record (see `parse_node_record`), an id
    twice, a parent that is not a node, a cycle, a bad branch or next_id. The records are
    only read: nodes get their own copies of tags and metadata.

    `consume`: empty `records` once their values are copied out, before the graph is built.
    The graph then holds none of the parsed file's objects, so the memory the parse took is
    whole and free again (`_own_values`); a store that parsed the file for this alone passes it.

    `on_indexed(columns, index)`: called once the records are checked and copied into columns
    and the word index is built from them, before anything changes either (what a load image
    keeps: `engine/load_image.py`).
    """
    if type(records) is not list:
        raise ValueError(f"nodes must be a list, got {_kind(records)}")
    if type(next_id) is not int or next_id < 1:
        raise ValueError(f"next_id must be a positive integer, got {next_id!r}")
    with paused_gc():
        graph = SoulGraph(clock=clock, recency_weight=recency_weight)
        if records:
            columns = _clean_columns(records, copied=not consume) or _checked_columns(records)
            if consume:
                _own_values(columns)
                records.clear()
            _fill(graph, columns, on_indexed=on_indexed)
        _fill_branch(graph, exploration)
        graph.next_id = next_id
        graph.dirty.clear()
        graph.branch_dirty = False
    return graph


def load_graph_from_image(image: load_image.Image, *, clock: Clock = time.time,
                          recency_weight: float = DEFAULT_RECENCY_WEIGHT) -> SoulGraph:
    """The graph `load_graph` built when it made this image (`load_image.read`): from the
    columns it had checked and the index it had built, with no parse and no check again.
    ValueError when the image's parts do not fit together."""
    header = image.header
    with paused_gc():
        graph = SoulGraph(clock=clock, recency_weight=recency_weight)
        if image.columns[0]:
            columns = _Columns(*image.columns)
            columns.memory = image.memory
            _fill(graph, columns, index_parts=image.index)
        _fill_branch(graph, header["exploration"])
        graph.next_id = header["next_id"]
        graph.dirty.clear()
        graph.branch_dirty = False
    return graph


def _fill(graph: SoulGraph, c: _Columns, *, on_indexed: Callable[[_Columns, InvertedIndex], None] | None = None,
          index_parts: tuple[Any, ...] | None = None) -> None:
    ids = c.id
    n = len(ids)
    nodes = dict(zip(ids, map(Node, ids, c.content, c.tags, c.created_at, c.last_accessed,
                              c.access_count, c.pinned, c.metadata)))
    if len(nodes) != n:
        _raise_duplicate(ids)
    node_list = list(nodes.values())
    for name, column in c.memory.items():  # only the records that have the field
        has = list(map(is_not, column, repeat(_MISSING)))
        deque(map(setattr, compress(node_list, has), repeat(name), compress(column, has)), maxlen=0)

    # The word index first: its slots are the nodes' positions in the file, used below.
    index = InvertedIndex(graph.indexed_text)
    if index_parts is not None:
        load_image.fill_index(index, index_parts, ids)
    else:
        index.add_many(ids, list(map(add, map(add, c.content, repeat(" ")), map(" ".join, c.tags))))
        if on_indexed is not None:
            on_indexed(c, index)
    position = index.slot_map()

    # Edges: parents as listed; children filled in file order, as one-by-one edges were.
    parent_ids = list(chain.from_iterable(c.parents))
    children_lists = dict(zip(ids, map(list, repeat((), n))))
    try:
        deque(map(list.append, map(children_lists.__getitem__, parent_ids),
                  chain.from_iterable(map(repeat, ids, map(len, c.parents)))), maxlen=0)
    except (KeyError, TypeError):  # not a node id, or not even a string
        _raise_bad_parent(ids, c.parents, position)
    children = dict(zip(ids, edges.packed_all(list(map(tuple, children_lists.values())))))
    del children_lists
    parents = dict(zip(ids, edges.packed_all(c.parents)))
    # Edges that all point forwards in the file's order cannot close a cycle; otherwise look.
    if not all(map(lt, map(position.__getitem__, parent_ids),
                   chain.from_iterable(map(repeat, range(n), map(len, c.parents))))):
        _check_acyclic(parents, children)

    # Tags and pins, each set filled in file order.
    tags: defaultdict[str, set[str]] = defaultdict(set)
    deque(map(set.add, map(tags.__getitem__, chain.from_iterable(c.tags)),
              chain.from_iterable(map(repeat, ids, map(len, c.tags)))), maxlen=0)

    # The recency order: Node.recency_key's arithmetic, column-wise (bit-identical).
    keys = list(map(add, map(math.log1p, c.access_count), map(truediv, c.last_accessed, repeat(DAY))))
    items = list(zip(keys, ids))
    last_item = items[-1]
    if len(set(keys)) == n:
        items.sort(key=itemgetter(0))  # distinct keys: floats alone decide, compared at C speed
    else:
        items.sort(key=itemgetter(1))  # ties: by id within a key (stable sorts)
        items.sort(key=itemgetter(0))
    order = SplayTree.from_sorted(items)
    order.touch(last_item)  # one-by-one inserts leave the last inserted item at the root

    graph.nodes = nodes
    graph.parents = parents
    graph.children = children
    graph.tags = dict(tags)
    graph.pinned = set(compress(ids, c.pinned))
    graph.order = order
    graph.index = index
    kinds: defaultdict[str, set[str]] = defaultdict(set)
    deque(map(set.add, map(kinds.__getitem__, map(attrgetter("kind"), node_list)), ids), maxlen=0)
    graph.kinds = dict(kinds)
    if "scope" in c.memory:  # users' memories (shared ones are not listed)
        scopes: defaultdict[str, set[str]] = defaultdict(set)
        for node in node_list:
            if node.scope:
                scopes[node.scope].add(node.id)
        graph.scopes = dict(scopes)
    if "status" in c.memory:  # memories out of default recall move to the archive's index
        for node in nodes.values():
            if node.status != "active":
                graph._deactivate(node)


def _fill_branch(graph: SoulGraph, exploration: object) -> None:
    if exploration is None:
        return
    if type(exploration) is not dict or type(exploration.get("nodes")) is not list:
        raise ValueError(f'exploration must be null or an object with a "nodes" list, got {exploration!r:.80}')
    for position, record in enumerate(exploration["nodes"]):
        where = _where(position, record, "hypothesis")
        node, parents = parse_node_record(record, where)
        if node.id in graph.nodes or node.id in graph.branch:
            raise ValueError(f"{where}: id {node.id!r} appears twice")
        graph.branch[node.id] = node
        graph.branch_parents[node.id] = set(parents)
    for node_id, parents in graph.branch_parents.items():
        for parent in parents:
            if parent not in graph.nodes and parent not in graph.branch:
                raise ValueError(f"hypothesis {node_id!r}: parent {parent!r} is not a node or a hypothesis")


def _raise_duplicate(ids: list[str]) -> None:
    seen: set[str] = set()
    for position, node_id in enumerate(ids):
        if node_id in seen:
            raise ValueError(f"node {position}: id {node_id!r} appears twice")
        seen.add(node_id)


def _raise_bad_parent(ids: list[str], parents: list[list[Any]], position: Mapping[str, int]) -> None:
    for at, (node_id, node_parents) in enumerate(zip(ids, parents)):
        for parent in node_parents:
            if type(parent) is not str:
                raise ValueError(f"node {at} (id {node_id!r}): parents must be a list of strings, "
                                 f"got a {_kind(parent)} in it")
            if parent not in position:
                raise ValueError(f"node {at} (id {node_id!r}): parent {parent!r} is not a node in the file")
    raise AssertionError("no bad parent found")  # unreachable: the caller met one


def _check_acyclic(parents: dict[str, edges.Edges], children: dict[str, edges.Edges]) -> None:
    """Kahn's algorithm: every node can be taken in parent-first order iff there is no cycle."""
    indegree = {node_id: len(node_parents) for node_id, node_parents in parents.items()}
    ready = [node_id for node_id, degree in indegree.items() if degree == 0]
    taken = 0
    while ready:
        node_id = ready.pop()
        taken += 1
        for child in children[node_id]:
            indegree[child] -= 1
            if indegree[child] == 0:
                ready.append(child)
    if taken != len(parents):
        stuck = sorted(node_id for node_id, degree in indegree.items() if degree > 0)[:5]
        raise ValueError(f"the edges form a cycle through {', '.join(stuck)}")
