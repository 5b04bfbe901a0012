"""How soon a freshly started MCP server answers, against a baseline revision and the SDK's floor.

    .venv/bin/python bench/bench_first_answer.py [--size 100000] [--rounds 3] [--base 7e53fc3]

A synthetic soul of `--size` memories (bench/synthetic.py) is written once, and each tree gets a
copy of its own. Then, in each round, a server from this tree and one from `--base` (a temporary
git worktree) are started in turn on their copies (`python -m soulgraph.mcp --no-embed`), each
driven by the MCP SDK's stdio client as Hermes drives it, and timed from process start to:

- `tools/list` answered (a big soul is read only after this, in the background);
- the first `soul_summary` answered (it waits for the graph to be read);
- the first `soul_query` answered right after it (it also waits for whatever the server still
  does in the background after the read, e.g. the common words' masks);
- a second `soul_query` (the steady state, for comparison).

The floor is the SDK's do-nothing server (one `echo` tool), started the same way, to its
`tools/list`. Each tree's first start (the first round: nothing beside the soul yet, as after a
new snapshot) is shown apart from its restarts (the later rounds, medians: what a server started
again on the same soul, as at each Hermes session, waits for); the files a server leaves beside
its soul (the load image) stay there for its restarts. Without the vectors: their load runs in the background
and no answer waits for it (a question searches by words meanwhile), so it is left out.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

import synthetic  # noqa: E402
from bench_mcp import ECHO_SERVER  # noqa: E402
from revisions import worktree  # noqa: E402
from soulgraph.store import SoulFile  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DEADLINE = 120.0  # seconds a server may take to its last answer before the bench gives up
MARKS = ("tools/list", "1st soul_summary", "1st soul_query", "2nd soul_query")


async def timeline(params: StdioServerParameters, question: str | None) -> list[float]:
    """Seconds from start to each of MARKS (only the first, for the floor: question None)."""
    started = time.perf_counter()
    async with Client(params) as client:
        await client.list_tools()
        marks = [time.perf_counter() - started]
        if question is None:
            return marks
        for name, arguments in (("soul_summary", {}), ("soul_query", {"query": question}),
                                ("soul_query", {"query": question + " again"})):
            result = await client.call_tool(name, arguments)
            if result.is_error:
                raise RuntimeError(f"{name} failed: {result.content[0].text}")
            marks.append(time.perf_counter() - started)
        return marks


def timed(params: StdioServerParameters, question: str | None) -> list[float]:
    async def bounded() -> list[float]:
        return await asyncio.wait_for(timeline(params, question), DEADLINE)

    return asyncio.run(bounded())


def server(runtime: Path, soul_file: Path) -> StdioServerParameters:
    env = {**os.environ, "PYTHONPATH": str(runtime)}
    return StdioServerParameters(command=sys.executable, args=["-m", "soulgraph.mcp", "--no-embed",
                                                               "--soul-file", str(soul_file)], env=env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000, help="memories in the soul (default 100,000)")
    parser.add_argument("--rounds", type=int, default=3, help="starts of each server (default 3)")
    parser.add_argument("--base", default="7e53fc3", help="the revision to compare with (default 7e53fc3)")
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error("--rounds must be at least 2 (a first start, then restarts)")
    question = synthetic.questions(1)[0]
    with tempfile.TemporaryDirectory(prefix="soulbench-first-") as folder, worktree(args.base) as base_tree:
        work = Path(folder)
        started = time.perf_counter()
        master = work / "soul.json"
        SoulFile(master).save(synthetic.build(args.size))
        print(f"{args.size:,} memories, {master.stat().st_size / 1e6:.1f} MB, built in "
              f"{time.perf_counter() - started:.1f} s; {args.rounds} rounds, the trees taking turns; "
              f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
        echo_script = work / "echo_server.py"
        echo_script.write_text(ECHO_SERVER)
        echo = StdioServerParameters(command=sys.executable, args=[str(echo_script)])
        trees = {"this tree": REPO / "runtime", args.base: base_tree / "runtime"}
        copies = {}
        for name in trees:
            copies[name] = work / name.replace(" ", "-") / "soul.json"
            copies[name].parent.mkdir()
            shutil.copy2(master, copies[name])
        rows = [row for name in trees for row in (f"{name}, 1st start", f"{name}, restarts")]
        samples: dict[str, list[list[float]]] = {name: [] for name in (*rows, "echo floor")}
        for round_number in range(args.rounds):
            samples["echo floor"].append(timed(echo, None))
            for name, runtime in trees.items():
                row = f"{name}, 1st start" if round_number == 0 else f"{name}, restarts"
                samples[row].append(timed(server(runtime, copies[name]), question))
        floor = statistics.median(run[0] for run in samples["echo floor"])
        width = max(map(len, samples))
        header = f"{'server':<{width}} | " + " | ".join(f"{mark + ' s':>18}" for mark in MARKS)
        print(header)
        print("-" * len(header))
        for name, runs in samples.items():
            if not runs:
                continue
            cells = [statistics.median(run[at] for run in runs) if all(len(run) > at for run in runs) else None
                     for at in range(len(MARKS))]
            print(f"{name:<{width}} | " + " | ".join(f"{cell:>18.2f}" if cell is not None else f"{'':>18}" for cell in cells))
        print(f"\nseconds from process start: the first round, then medians of the {args.rounds - 1} later ones "
              f"(the echo floor: of all {args.rounds}); the echo floor's tools/list: {floor:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
