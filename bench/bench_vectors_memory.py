"""Resident memory of a soul's vectors: what loading them adds, and what writes add after.

    python bench/bench_vectors_memory.py --size 100000            # builds /tmp/soul-100000.json once
    python bench/bench_vectors_memory.py --soul /path/soul.json --writes 30,300

Each run copies the soul file and its vectors file to a temporary folder (the writes never
touch the originals), loads the graph, then the vectors (from the file: the first run for a
soul builds it, which takes minutes at 100,000), and reads VmRSS from /proc/self/status after
each step (the graph once loaded, then once its common words' masks are built, as a server
builds them after its load). The writes add memories to the graph and let the vectors follow (what soul_add does:
the next search embeds them); 300 writes include a save of the vectors file (every 256). With
--rebuild there is no vectors file: every memory is embedded, as at a first start. Prints
one JSON object; the figures are MB. To compare with another commit, run the same command with
PYTHONPATH=<worktree>/runtime.
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synthetic  # noqa: E402

import soulgraph.memory  # noqa: E402,F401  the write guard, as every writer installs it
from soulgraph.store import SoulFile  # noqa: E402
from soulgraph.store.vectors import VectorStore, vectors_path  # noqa: E402


def status(field: str) -> float:
    with open("/proc/self/status") as status_file:
        for line in status_file:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def rss() -> float:
    gc.collect()
    return status("VmRSS")


def reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM back to the current RSS
        return True
    except OSError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100000, help="memories of the synthetic soul built if --soul is not given")
    parser.add_argument("--soul", type=Path, help="a soul file (its .vectors file beside it is used, or built)")
    parser.add_argument("--writes", default="30", help="comma-separated counts of memories added after the load, in turn")
    parser.add_argument("--rebuild", action="store_true", help="no vectors file: every memory embedded (what a first start does)")
    args = parser.parse_args()
    soul = args.soul or Path(tempfile.gettempdir()) / f"soul-{args.size}.json"
    if not soul.exists():
        SoulFile(soul).save(synthetic.build(args.size))
    if not vectors_path(soul).exists():  # the first run for this soul: build the vectors file once
        graph = SoulFile(soul).graph()
        VectorStore(vectors_path(soul), background=False).ready(graph)
        del graph
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / soul.name
        shutil.copyfile(soul, copy)
        if not args.rebuild:
            shutil.copyfile(vectors_path(soul), vectors_path(copy))
        start = rss()
        graph = SoulFile(copy).graph()
        loaded = rss()
        graph.index.build_common_masks()  # what a server does after its load (SoulFile.preload)
        with_graph = rss()
        store = VectorStore(vectors_path(copy), background=False)
        peaks = reset_peak()
        began = time.perf_counter()
        assert store.ready(graph)
        store.nearest("hello world", 10)
        seconds = time.perf_counter() - began
        with_vectors = rss()
        out.update(memories=len(graph.nodes), loaded_from=store.loaded_from, start=round(start, 1),
                   graph=round(loaded - start, 1), **{"graph, its masks built": round(with_graph - start, 1)},
                   vectors=round(with_vectors - with_graph, 1),
                   load_seconds=round(seconds, 2))
        if peaks:
            out["peak above the graph, loading"] = round(status("VmHWM") - with_graph, 1)
        index = store.index
        out["capacity"] = len(index.marks)
        # What a row is kept as: its vector (float32 or float16), or its coordinates (TAIL_FROM).
        out["rows kept as"] = "coordinates" if index.matrix is None else str(index.matrix.dtype)
        before, total = with_vectors, 0
        peaks = reset_peak()
        for count in [int(part) for part in args.writes.split(",") if part]:
            graph_share = vectors_share = 0.0
            for number in range(count):
                ahead = status("VmRSS")
                graph.add(f"a new memory number {total + number} about w{number} and w{number * 7}", ["project:p1"])
                between = status("VmRSS")
                assert store.ready(graph)  # the next search embeds it, as after a soul_add
                store.nearest("what is new", 10)
                graph_share += between - ahead
                vectors_share += status("VmRSS") - between
            total += count
            out[f"after {total} writes"] = round(rss() - before, 1)
            out[f"  {total}: while adding to the graph"] = round(graph_share, 1)
            out[f"  {total}: while the vectors followed"] = round(vectors_share, 1)
            if peaks:
                out[f"  {total}: peak above the load"] = round(status("VmHWM") - before, 1)
        assert len(store.index) == len(graph.nodes)
        out["capacity after"] = len(store.index.marks)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
