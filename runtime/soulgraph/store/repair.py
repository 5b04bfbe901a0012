"""Mend a soul.json that names nodes it no longer holds: `python -m soulgraph.store repair PATH`.

Before soulgraph fixed them, two bugs could write such a file, and no process could load it:
a hard forget after a compaction left a child naming its forgotten parent, and forgetting a
node left hypotheses built on it naming it. In both cases only an edge to a node that is gone
is wrong, and the memory the user meant to keep is all there. `repair` drops exactly those
edges, and nothing else:

- under the write lock, it keeps the damaged file first (`soul.json.damaged-<time>`, mode 0600);
- it writes the mended snapshot with the same `seq`, so the journal beside it still follows;
- it reads the whole soul back (snapshot and journal) before it reports success.

Any other damage (not JSON, a foreign file, a broken journal, a missing field) is refused as
`check` reports it: that is not a dangling edge, and guessing would lose memories.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from soulgraph.store import snapshot
from soulgraph.store.atomic import write_atomically
from soulgraph.store.soulfile import SoulFile, SoulFileError


class RepairError(Exception):
    """The file cannot be mended this way; the message says why and what was left as it was."""


def dangling_edges(document: dict[str, Any]) -> list[dict[str, str]]:
    """Every parent named in the document that is neither a node nor (for a hypothesis) a
    hypothesis: [{"node": id, "parent": id, "in": "nodes" | "exploration"}]."""
    nodes = document.get("nodes")
    branch = (document.get("exploration") or {}).get("nodes", [])
    if not isinstance(nodes, list) or not isinstance(branch, list):
        return []
    known = {record.get("id") for record in nodes if isinstance(record, dict)}
    hypotheses = {record.get("id") for record in branch if isinstance(record, dict)}
    found = []
    for where, records, allowed in (("nodes", nodes, known), ("exploration", branch, known | hypotheses)):
        for record in records:
            if isinstance(record, dict) and isinstance(record.get("parents"), list):
                found += [{"node": record.get("id"), "parent": parent, "in": where}
                          for parent in record["parents"] if parent not in allowed]
    return found


def repair(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Drop the edges to nodes that are gone from the soul file at `path`; see the module."""
    soul = SoulFile(path)
    try:
        soul.graph()
        return {"soul_file": str(soul.path), "repaired": False, "dropped": [], "note": "the soul loads: nothing to mend"}
    except SoulFileError as exc:
        problem = str(exc)
    with soul._locked():
        try:
            raw = soul.path.read_bytes()
            document = json.loads(raw)
        except (OSError, ValueError) as exc:
            raise RepairError(f"{soul.path}: {problem}; not a dangling edge, so left as it is ({exc})") from None
        dropped = dangling_edges(document) if isinstance(document, dict) else []
        if not dropped:
            raise RepairError(f"{problem}; not a dangling edge, so left as it is")
        for records in (document["nodes"], document.get("exploration", {}).get("nodes", [])):
            for record in records:
                gone = {edge["parent"] for edge in dropped if edge["node"] == record.get("id")}
                if gone and isinstance(record.get("parents"), list):
                    record["parents"] = [parent for parent in record["parents"] if parent not in gone]
        try:
            graph, _, seq = snapshot.decode(json.dumps(document, ensure_ascii=False).encode("utf-8"), soul.clock)
        except snapshot.SnapshotError as exc:
            raise RepairError(f"{soul.path}: more than dangling edges is wrong ({exc}); left as it is") from None
        kept = soul.path.with_name(f"{soul.path.name}.damaged-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
        try:
            write_atomically(kept, raw, mode=0o600)
            write_atomically(soul.path, snapshot.encode(graph, seq, soul.clock(), {}), mode=0o600)
        except OSError as exc:
            raise RepairError(f"{soul.path}: cannot be written ({exc.strerror or exc}); left as it was") from None
    try:
        nodes = len(SoulFile(path).graph())
    except SoulFileError as exc:
        raise RepairError(f"the snapshot was mended, but the soul still does not load: {exc} "
                          f"(the damaged file is kept as {kept})") from None
    return {"soul_file": str(soul.path), "repaired": True, "dropped": dropped, "kept": str(kept), "nodes": nodes}
