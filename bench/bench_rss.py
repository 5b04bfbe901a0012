"""How much resident memory an MCP server keeps after writes, against a baseline revision.

    .venv/bin/python bench/bench_rss.py [--size 100000] [--calls 40] [--base 04df4cc] [--runs 1] [--embed]

A synthetic soul of `--size` memories (bench/synthetic.py) is served by `python -m soulgraph.mcp
--no-embed --toolsets graph,memory`, once from this tree and once from `--base` (a temporary git
worktree of it), alternating, driven by the MCP SDK's stdio client as Hermes drives it. Each
server reads the soul, then answers `--calls` soul_add calls and two hard soul_forget calls; its
VmRSS (/proc/PID/status) is read after the first answer, after the adds and after the forgets.
Two layouts of the same soul: soul.json with its journal (the adds are journal records, each
forget a whole new snapshot), and soul.json alone (a copy made without its journal, or one an
older runtime wrote: the first add writes a whole snapshot).

`--embed`: the servers run with their vectors (the runtime as it ships). Each tree's vectors file
is made once beforehand, by that tree's own runtime in a child process (the trees may keep the
file in different forms), and copied beside each of its souls; a server is measured once its
soul_summary says "hybrid" (at most VECTORS_DEADLINE seconds) and it has answered a question.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from revisions import worktree  # bench/: a temporary checkout of a revision

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, get_default_environment  # noqa: E402

import synthetic  # noqa: E402
import soulgraph.memory  # noqa: E402,F401  the write guard, as every writer installs it
from soulgraph.store import SoulFile  # noqa: E402
from soulgraph.store.vectors import vectors_path  # noqa: E402

LAYOUTS = ("with journal", "soul.json alone")
PRELOAD_STARTS = 0.3  # seconds: the server starts its background read 50 ms after tools/list
VECTORS_DEADLINE = 120.0  # seconds a server may take to load its vectors before the bench gives up
MAKE_VECTORS_DEADLINE = 900.0  # seconds a runtime may take to embed the whole soul once


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def server_pid(soul_file: Path) -> int:
    """The pid of our child process serving `soul_file`."""
    me = str(os.getpid())
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                parent = handle.read().rsplit(")", 1)[1].split()[1]
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                command = handle.read().split(b"\0")
        except OSError:
            continue
        if parent == me and str(soul_file).encode() in command:
            return int(entry)
    raise RuntimeError(f"no server process for {soul_file}")


async def hybrid_ready(client: Client) -> None:
    """Wait until the server searches with its vectors, then ask it one question."""
    deadline = time.monotonic() + VECTORS_DEADLINE
    while True:
        summary = (await client.call_tool("soul_summary", {})).structured_content
        if summary["search"]["mode"] == "hybrid":
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"no vectors after {VECTORS_DEADLINE:.0f} s: {summary['search']}")
        await asyncio.sleep(0.2)
    result = await client.call_tool("soul_query", {"query": "w1 w2 w3 about w17"})
    assert not result.is_error, result.content[0].text


async def measure(runtime: Path, soul_file: Path, calls: int, embed: bool = False) -> dict[str, float]:
    """Start a server from `runtime` on `soul_file`; RSS after the first answer, the adds and
    the forgets, and the second forget's round trip."""
    env = {**get_default_environment(), "PYTHONPATH": str(runtime)}
    params = StdioServerParameters(command=sys.executable, env=env, cwd=str(soul_file.parent),
                                   args=["-m", "soulgraph.mcp", "--soul-file", str(soul_file),
                                         *([] if embed else ["--no-embed"]), "--toolsets", "graph,memory"])
    async with Client(params) as client:
        await client.list_tools()
        await asyncio.sleep(PRELOAD_STARTS)  # the read and its word masks, in the background: waited for below
        await client.call_tool("soul_summary", {})
        if embed:
            await hybrid_ready(client)
        pid = server_pid(soul_file)
        started = rss_mb(pid)
        added = []
        for i in range(calls):
            result = await client.call_tool("soul_add", {"content": f"bench rss memory {i} about w1 w2 w{i + 7}",
                                                         "tags": ["project:p1"], "parents": [f"n{1 + i}"]})
            assert not result.is_error, result.content[0].text
            added.append(result.structured_content["id"])
        after_adds = rss_mb(pid)
        forget_seconds = 0.0
        for node_id in added[:2]:
            begun = time.perf_counter()
            result = await client.call_tool("soul_forget", {"node_id": node_id, "reason": "bench"})
            forget_seconds = time.perf_counter() - begun
            assert not result.is_error, result.content[0].text
        after_forgets = rss_mb(pid)
    return {"start": started, "adds": after_adds - started, "forgets": after_forgets - after_adds,
            "forget_ms": forget_seconds * 1000}


def vectors_made_by(runtime: Path, source: Path, folder: Path) -> Path:
    """The vectors file of `source` as `runtime` makes it (bench/synthetic.py's make_vectors,
    run in a child process with that runtime), beside a copy of the soul in `folder`."""
    folder.mkdir()
    soul_file = folder / "soul.json"
    shutil.copyfile(source, soul_file)
    shutil.copyfile(source.with_name(source.name + ".journal"), soul_file.with_name("soul.json.journal"))
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import synthetic; from pathlib import Path; "
            "reason = synthetic.make_vectors(Path(sys.argv[2])); sys.exit(reason)")
    env = {**os.environ, "PYTHONPATH": str(runtime)}
    done = subprocess.run([sys.executable, "-c", code, str(Path(__file__).resolve().parent), str(soul_file)],
                          env=env, timeout=MAKE_VECTORS_DEADLINE, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"--embed: {runtime} made no vectors: {done.stderr.strip()[-400:]}")
    return vectors_path(soul_file)


def one_run(runtime: Path, source: Path, layout: str, calls: int, vectors: Path | None) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        soul_file = Path(folder) / "soul.json"
        shutil.copyfile(source, soul_file)
        if layout == "with journal":
            shutil.copyfile(source.with_name(source.name + ".journal"), soul_file.with_name("soul.json.journal"))
        if vectors is not None:
            shutil.copyfile(vectors, vectors_path(soul_file))
        return asyncio.run(measure(runtime, soul_file, calls, vectors is not None))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000, help="memories in the soul (default 100,000)")
    parser.add_argument("--calls", type=int, default=40, help="soul_add calls per server (default 40)")
    parser.add_argument("--base", default="04df4cc", help="the revision to compare with (default 04df4cc)")
    parser.add_argument("--runs", type=int, default=1, help="servers per tree and layout; medians shown (default 1)")
    parser.add_argument("--runtime", type=Path, default=REPO / "runtime",
                        help="the runtime folder measured as 'this tree' (default: runtime/ of this checkout)")
    parser.add_argument("--embed", action="store_true", help="serve with vectors, as the runtime ships")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, worktree(args.base) as base_tree:
        source = Path(folder) / "soul.json"
        SoulFile(source).save(synthetic.build(args.size))
        trees = {"this tree": args.runtime.resolve(), args.base[:12]: base_tree / "runtime"}
        vectors = {name: vectors_made_by(runtime, source, Path(folder) / f"vectors-{number}") if args.embed else None
                   for number, (name, runtime) in enumerate(trees.items())}
        results: dict[tuple[str, str], list[dict[str, float]]] = {}
        for _ in range(args.runs):
            for layout in LAYOUTS:
                for name, runtime in trees.items():  # alternating, so drift in the machine hits both
                    results.setdefault((name, layout), []).append(one_run(runtime, source, layout, args.calls, vectors[name]))
    print(f"{args.size:,} memories, {args.calls} soul_add then 2 hard soul_forget, "
          f"{'with vectors' if args.embed else '--no-embed'}; MB of VmRSS "
          f"(median of {args.runs})")
    print(f"{'tree':<12} | {'layout':<15} | {'start MB':>8} | {'+ adds MB':>9} | {'+ forgets MB':>12} | {'2nd forget ms':>13}")
    print(f"{'-' * 12}-|-{'-' * 15}-|-{'-' * 8}-|-{'-' * 9}-|-{'-' * 12}-|-{'-' * 13}")
    for layout in LAYOUTS:
        for name in trees:
            runs = results[(name, layout)]
            value = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
            print(f"{name:<12} | {layout:<15} | {value['start']:>8.1f} | {value['adds']:>+9.1f} | "
                  f"{value['forgets']:>+12.1f} | {value['forget_ms']:>13.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
