"""soul.json itself: the whole graph as one self-contained JSON document.

Schema 4 (written by this version)::

    {"format": "soulgraph", "schema": 4, "seq": 41, "next_id": 42, "saved_at": 1.7e9,
     "nodes": [{"id", "content", "tags", "created_at", "last_accessed",
                "access_count", "pinned", "metadata", "parents": [ids],
                the memory record's fields that differ from their defaults:
                "kind", "source", "confidence", "status", … (engine/record.py)}, ...],
     "exploration": {"nodes": [... the same ...]},
     "audit": [{"at", "action", "node", "writer", "reason"?, "before", "after"}, ...]}

`seq` is the number of the last change the snapshot holds; the journal beside it
(`journal.py`) holds the changes after it. Schema 3 is the same without `scope` (every memory
shared: memory/scopes.py); schema 2 also without the memory fields; schema 1 also without
`seq` (and without a journal), read as seq 0. All are read, and rewritten as schema 4 on the
first write (after a backup, `soul.json.bak-schema<N>`). Schema 4 exists so that a release
which does not know scopes refuses a file that has them instead of showing one user's
memories to every other.
"""

from __future__ import annotations

import json
import re
from functools import partial
from pathlib import Path
from typing import Any

from soulgraph.engine.graph import Clock, DEFAULT_RECENCY_WEIGHT, Node, SoulGraph
from soulgraph.engine import load_image
from soulgraph.engine.load import MISSING, RECORD_FIELDS, load_graph, load_graph_from_image, parse_node_record
from soulgraph.engine.load_image import ImageStore

FORMAT = "soulgraph"
SCHEMA = 4
READABLE_SCHEMAS = (1, 2, 3, 4)
# The header as `encode` writes it, so a big file can be checked by its first bytes.
_HEADER = re.compile(rb'^\{"format": "([^"]*)", "schema": (\d+)(?:, "seq": (\d+))?')
_NODES_START = ',\n"nodes": [\n'
_NODES_END = '\n],\n"exploration": '
_LINE_ID = re.compile(r'\{"id": ("(?:[^"\\]|\\.)*"), "content": ')


class SnapshotError(ValueError):
    """The snapshot cannot be read; the message says what is wrong (not which file)."""


def encode(graph: SoulGraph, seq: int, saved_at: float, encoded_nodes: dict[str, str]) -> bytes:
    """The snapshot's bytes. `encoded_nodes` caches each node's JSON between snapshots:
    only the nodes changed since the last one (`graph.dirty`) are encoded again. The dirty
    marks stay: only the writer knows when the bytes are safely in the file (SoulFile clears
    them then; cleared before, a failed write would let the next snapshot reuse old lines)."""
    for node_id in graph.dirty:
        if node_id in graph.nodes:
            encoded_nodes[node_id] = encode_node(graph, node_id)
        else:
            encoded_nodes.pop(node_id, None)
    if len(encoded_nodes) != len(graph.nodes):  # first snapshot after a load: encode the rest
        for node_id in graph.nodes.keys() - encoded_nodes.keys():
            encoded_nodes[node_id] = encode_node(graph, node_id)
    header = json.dumps({"format": FORMAT, "schema": SCHEMA, "seq": seq, "next_id": graph.next_id, "saved_at": saved_at})
    text = "".join([
        header[:-1],
        ',\n"nodes": [\n',
        ",\n".join(encoded_nodes[node_id] for node_id in graph.nodes),
        '\n],\n"exploration": ',
        json.dumps({"nodes": graph.branch_records()}, ensure_ascii=False),
        ',\n"audit": [',
        ",\n".join(json.dumps(entry, ensure_ascii=False) for entry in graph.audit),
        "]}\n",
    ])
    return text.encode("utf-8")


def node_lines(raw: bytes) -> dict[str, str]:
    """Each node's line in a snapshot `encode` wrote, by id: what the next snapshot can
    reuse for the nodes that have not changed since (encoding 100,000 nodes anew costs
    more than a second; finding their lines, a tenth of that). Lines not in our one-node-
    per-line layout are simply not offered."""
    text = raw.decode("utf-8")
    start = text.find(_NODES_START)
    end = text.rfind(_NODES_END)
    if start < 0 or end < start:
        return {}
    lines: dict[str, str] = {}
    for line in text[start + len(_NODES_START):end].split("\n"):
        match = _LINE_ID.match(line)
        if match:
            node_id = match.group(1)
            lines[json.loads(node_id) if "\\" in node_id else node_id[1:-1]] = line.removesuffix(",")
    return lines


def encode_node(graph: SoulGraph, node_id: str) -> str:
    return json.dumps(graph.record(node_id), ensure_ascii=False)


def read_header(head: bytes) -> tuple[str, int, int] | None:
    """(format, schema, seq) from a snapshot's first bytes, when it starts as ours does."""
    match = _HEADER.match(head)
    if not match:
        return None
    return match.group(1).decode("utf-8", "replace"), int(match.group(2)), int(match.group(3) or 0)


def check_schema(schema: object) -> int:
    if type(schema) is not int or schema < 1:
        raise SnapshotError(f"unreadable schema {schema!r}")
    if schema not in READABLE_SCHEMAS:
        raise SnapshotError(f"schema {schema} is newer than this soulgraph understands ({SCHEMA}); upgrade soulgraph")
    return schema


def decode(raw: bytes, clock: Clock, recency_weight: float = DEFAULT_RECENCY_WEIGHT,
           images: ImageStore | None = None) -> tuple[SoulGraph, int, int]:
    """(graph, schema, seq) from a snapshot's bytes, or SnapshotError naming the problem.

    `images`: where a large snapshot's load image is kept (`engine/load_image.py`). The graph
    comes from the image when it was made from these very bytes; otherwise from the bytes, and
    a snapshot of `IMAGE_FROM` memories or more leaves a new image there for the next load."""
    made_from = b""  # the key hashes the whole snapshot: made only when an image is read or written
    image = images.read() if images is not None else None
    if image:
        made_from = load_image.key(raw)
        kept = load_image.read(image, made_from, MISSING)
        del image
        if kept is not None:
            try:
                graph = load_graph_from_image(kept, clock=clock, recency_weight=recency_weight)
            except (KeyError, TypeError, ValueError, IndexError):
                pass  # not an image this runtime can use after all: the bytes decide
            else:
                graph.audit = kept.header["audit"]
                return graph, kept.header["schema"], kept.header["seq"]
            finally:
                del kept
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SnapshotError("not UTF-8 text") from None
    try:
        data = json.loads(text)
    except RecursionError:
        raise SnapshotError("not a soul graph: JSON nested too deeply") from None
    except ValueError as exc:
        raise SnapshotError(f"not valid JSON ({exc})") from None
    del text
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SnapshotError(f"not a soul graph file (no \"format\": \"{FORMAT}\")")
    schema = check_schema(data.get("schema"))
    seq = data.get("seq", 0)
    if type(seq) is not int or seq < 0:
        raise SnapshotError(f"unreadable seq {seq!r}")
    nodes = data.get("nodes")
    if not isinstance(nodes, list):
        raise SnapshotError(f"\"nodes\" is {type(nodes).__name__}, not a list")
    audit = data.get("audit", [])
    if type(audit) is not list or not all(type(entry) is dict for entry in audit):
        raise SnapshotError('"audit" must be a list of objects')
    next_id, exploration = data.get("next_id", 1), data.get("exploration")
    keep = None
    if images is not None and len(nodes) >= load_image.IMAGE_FROM:
        header = {"schema": schema, "seq": seq, "next_id": next_id, "exploration": exploration, "audit": audit}
        keep = partial(_keep_image, images, made_from or load_image.key(raw), header)
    try:
        graph = load_graph(nodes, next_id=next_id, exploration=exploration, clock=clock,
                           recency_weight=recency_weight, consume=True, on_indexed=keep)
    except (KeyError, TypeError, ValueError) as exc:
        raise SnapshotError(f"damaged soul graph ({exc})") from None
    graph.audit = audit
    return graph, schema, seq


def _keep_image(images: ImageStore, made_from: bytes, header: dict[str, Any], columns: Any, index: Any) -> None:
    """Write the image of a load that has just checked `columns` and built `index` from them."""
    images.write(load_image.dump(made_from, header, columns, RECORD_FIELDS, MISSING, index))


def parse_node(record: Any) -> Node:
    """One node record, strictly checked (for journal replay)."""
    return parse_node_record(record, f"node {record.get('id') if isinstance(record, dict) else record!r}")[0]


def head_of(path: Path, size: int = 256) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(size)
