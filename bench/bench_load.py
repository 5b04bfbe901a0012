"""How fast a soul.json loads into a graph that can answer questions, against the old load.

    .venv/bin/python bench/bench_load.py [--sizes 1000,10000,100000] [--repeat 3]

The baseline runs in the same invocation: `baseline_insert` below is a frozen copy of the
loop `store/soulfile.py`'s decode ran before `soulgraph.engine.load`: each record through
`Node.from_dict` and `SoulGraph._insert` (a splay-tree insert, an index add, tag and pin
updates per node), then the edges, then one cycle check. It calls the engine's
`_insert`, so it keeps measuring the one-by-one algorithm as the engine changes.

For each size, a synthetic graph (bench/synthetic.py) is written as a schema-1 soul.json.
Then, in this process, from the same parsed JSON: `json.loads`, the old one-by-one insert
(collector on, as the old store ran it) and `load_graph` (inside `paused_gc`, as a store
runs it), best of `--repeat` runs each, alternating; before any timing, both
graphs must answer 200 questions identically (ids and scores, bit for bit). Then, in a
fresh process per run (so each has its own heap and its own peak): the whole load from
the file's bytes to a graph that answers `query()`, the way a store does it (decode,
`json.loads`, build, drop the parsed JSON, `gc.freeze()`), with the old insert and
with the new load (which also parses with the garbage collector paused, as
`paused_gc` lets a store do), the first question's time after it, and the peak
resident memory of that process.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synthetic  # noqa: E402
from soulgraph.engine import edges as edge_groups  # noqa: E402
from soulgraph.engine.graph import DEFAULT_RECENCY_WEIGHT, Node, SoulGraph  # noqa: E402
from soulgraph.engine.load import load_graph, paused_gc  # noqa: E402


# ----------------------------------------------------------------- the frozen baseline
def baseline_insert(data: dict[str, Any], clock=time.time, recency_weight: float = DEFAULT_RECENCY_WEIGHT) -> SoulGraph:
    """The old `store.soulfile.decode` after `json.loads`: records inserted one by one."""
    graph = SoulGraph(clock=clock, recency_weight=recency_weight)
    records = data["nodes"]
    edges: list[tuple[str, str]] = []
    for record in records:
        node = Node.from_dict(record)
        if node.id in graph.nodes:
            raise ValueError(f"node id {node.id!r} appears twice")
        graph._insert(node)
        edges.extend((str(parent), node.id) for parent in record.get("parents", []))
    for parent, child in edges:
        graph.get(parent)  # an edge to a node that is not there: damaged
        # A node's edges are a tuple while few (engine/edges.py): joined returns what to store.
        graph.children[parent] = edge_groups.joined(graph.children[parent], child)
        graph.parents[child] = edge_groups.joined(graph.parents[child], parent)
    _baseline_check_acyclic(graph)
    for record in data.get("exploration", {}).get("nodes", []):
        node = Node.from_dict(record)
        graph.branch[node.id] = node
        graph.branch_parents[node.id] = {str(p) for p in record.get("parents", [])}
    graph.next_id = int(data.get("next_id", 1))
    graph.dirty.clear()
    graph.branch_dirty = False
    return graph


def _baseline_check_acyclic(graph: SoulGraph) -> None:
    indegree = {node_id: len(parents) for node_id, parents in graph.parents.items()}
    ready = [node_id for node_id, degree in indegree.items() if degree == 0]
    taken = 0
    while ready:
        node_id = ready.pop()
        taken += 1
        for child in graph.children[node_id]:
            indegree[child] -= 1
            if indegree[child] == 0:
                ready.append(child)
    if taken != len(graph.nodes):
        raise ValueError("the edges form a cycle")


def new_load(data: dict[str, Any], clock=time.time) -> SoulGraph:
    return load_graph(data["nodes"], next_id=data.get("next_id", 1), exploration=data.get("exploration"), clock=clock)


# ----------------------------------------------------------------- the file
def write_soul_file(graph: SoulGraph, path: Path) -> None:
    """Schema 1 as the store writes it: a header, one node per line, the branch."""
    lines = [json.dumps({**node.to_dict(), "parents": sorted(graph.parents[node_id])}, ensure_ascii=False)
             for node_id, node in graph.nodes.items()]
    header = json.dumps({"format": "soulgraph", "schema": 1, "next_id": graph.next_id, "saved_at": graph.clock()})
    path.write_text(header[:-1] + ',\n"nodes": [\n' + ",\n".join(lines) + '\n],\n"exploration": {"nodes": []}}\n',
                    encoding="utf-8")


# ----------------------------------------------------------------- measuring
def check_identical(old: SoulGraph, new: SoulGraph, questions: list[str]) -> None:
    """Both loads must give the same graph and the same answers before anything is timed."""
    assert {i: n.to_dict() for i, n in old.nodes.items()} == {i: n.to_dict() for i, n in new.nodes.items()}
    assert old.parents == new.parents and old.children == new.children and old.tags == new.tags
    assert list(old.order.descending()) == list(new.order.descending()) and old.pinned == new.pinned
    for q in questions:
        assert [(h.node.id, h.score) for h in old.query(q, 10)] == [(h.node.id, h.score) for h in new.query(q, 10)], q
        assert [(h.node.id, h.score, h.via) for h in old.related(q, 10)] == \
               [(h.node.id, h.score, h.via) for h in new.related(q, 10)], q
    assert [n.id for n in old.hot(20)] == [n.id for n in new.hot(20)]


def best_of(function, repeat: int) -> float:
    best = math.inf
    for _ in range(repeat):
        gc.collect()
        started = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - started)
        del result
    return best


def in_process(path: Path, repeat: int) -> tuple[float, float, float]:
    """(json.loads, old insert, load_graph) seconds, from the same parsed JSON."""
    text = path.read_text(encoding="utf-8")
    loads = best_of(lambda: json.loads(text), repeat)
    data = json.loads(text)
    old, new = math.inf, math.inf
    for _ in range(repeat):  # alternating, so both meet the same machine
        old = min(old, best_of(lambda: baseline_insert(data), 1))
        new = min(new, best_of(lambda: paused_load(data), 1))
    return loads, old, new


def paused_load(data: dict[str, Any]) -> SoulGraph:
    """`load_graph` as a store calls it: inside `paused_gc`, so the collection of what it
    built (which a store avoids by freezing it) is not counted here."""
    with paused_gc():
        return new_load(data)


def child(method: str, path: Path) -> None:
    """One whole load from the file's bytes, in this fresh process; prints what it measured."""
    question = synthetic.questions(1, seed=9)[0]
    started, cpu_started = time.perf_counter(), time.process_time()
    raw = path.read_bytes()
    if method == "old":
        data = json.loads(raw.decode("utf-8"))
        graph = baseline_insert(data)
        del data
        gc.freeze()
    else:
        with paused_gc():
            data = json.loads(raw.decode("utf-8"))
            graph = new_load(data)
            del data
            gc.freeze()
    loaded, cpu = time.perf_counter(), time.process_time() - cpu_started
    graph.query(question, 10)
    answered = time.perf_counter()
    print(json.dumps({"load": loaded - started, "cpu": cpu, "first_query": answered - loaded,
                      "peak_mb": peak_rss_mb()}))


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, not inherited from
    the parent that forked it)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def whole_load(method: str, path: Path, repeat: int) -> dict[str, float]:
    """Best load time of `repeat` fresh processes; first query and peak memory of that best run."""
    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, __file__, "--child", method, "--file", str(path)],
                             check=True, capture_output=True, text=True).stdout
        runs.append(json.loads(out))
    return min(runs, key=lambda run: run["load"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", choices=["old", "new"], help=argparse.SUPPRESS)
    parser.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.file)
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="soulbench-load-"))
    questions = synthetic.questions(200)
    print(f"python {sys.version.split()[0]}; synthetic soul graphs (bench/synthetic.py); seconds, best of "
          f"{args.repeat}; old = one-by-one insert (frozen copy of the old decode loop), new = load_graph")
    print("in this process, from the same parsed JSON | in a fresh process, file bytes -> graph that answers query()")
    header = (f"{'nodes':>7} | {'file MB':>7} | {'json.loads':>10} | {'old insert':>10} | {'load_graph':>10} | "
              f"{'x':>5} | {'total old':>9} | {'total new':>9} | {'x':>5} | {'1st query ms':>12} | "
              f"{'peak MB old':>11} | {'peak MB new':>11}")
    print(header)
    print("-" * len(header))
    for size in sizes:
        path = work / f"soul-{size}.json"
        write_soul_file(synthetic.build(size), path)
        data = json.loads(path.read_text(encoding="utf-8"))
        now = time.time()  # one "now" for both, so recency boosts are the same
        check_identical(baseline_insert(data, lambda: now), new_load(data, lambda: now), questions)
        del data
        loads, old, new = in_process(path, args.repeat)
        whole_old = whole_load("old", path, args.repeat)
        whole_new = whole_load("new", path, args.repeat)
        print(f"{size:>7} | {path.stat().st_size / 1e6:>7.1f} | {loads:>10.3f} | {old:>10.3f} | {new:>10.3f} | "
              f"{old / new:>5.1f} | {whole_old['load']:>9.3f} | {whole_new['load']:>9.3f} | "
              f"{whole_old['load'] / whole_new['load']:>5.1f} | {whole_new['first_query'] * 1e3:>12.1f} | "
              f"{whole_old['peak_mb']:>11.0f} | {whole_new['peak_mb']:>11.0f}", flush=True)


if __name__ == "__main__":
    main()
