"""How fast the soul graph answers an agent, against the MCP SDK's own floor.

    .venv/bin/python bench/bench_mcp.py [--sizes 1000,10000,100000] [--calls 200]

Baseline, run in the same invocation: an MCP server built on the same SDK whose one
tool does nothing (`echo`). Everything is driven by the SDK's stdio client, as Hermes
drives it. Measured per graph size:
- start: process start to the first tools/list answer (median of 3); first answer: to the
  first soul_summary answer, which waits for the graph to be read (large files are read in
  the background after start);
- soul_query / soul_related: tools/call round trips, p50 and p99;
- writes: soul_add, soul_link, soul_pin, soul_splay round trips, p50 (and add's p99), each
  durable (fsynced) before it is answered;
- engine: the graph's own time per question in-process (no transport), p50: recall and
  related as the tools rank them (memory/ranking.py; the engine's query and related when
  PYTHONPATH points at a checkout older than that);
- save of a whole soul.json, and a cold load of it in-process (parse, index, tree).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

import synthetic  # noqa: E402
from soulgraph.store import SoulFile  # noqa: E402

try:  # what soul_query / soul_related rank by since issue 9
    from soulgraph.memory.ranking import recall as tool_query, related as tool_related  # noqa: E402
except ImportError:  # an older checkout: the tools used the engine's own search
    def tool_query(graph, text, k):
        return graph.query(text, k)

    def tool_related(graph, text, k):
        return graph.related(text, k)

ECHO_SERVER = textwrap.dedent(
    """
    from mcp.server.mcpserver import MCPServer
    app = MCPServer("echo", log_level="WARNING")

    @app.tool()
    async def echo(text: str) -> str:
        \"\"\"Return the text.\"\"\"
        return text

    app.run()
    """
)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def time_calls(client: Client, name: str, argument_list: list[dict]) -> list[float]:
    samples = []
    for arguments in argument_list:
        started = time.perf_counter()
        result = await client.call_tool(name, arguments)
        samples.append(time.perf_counter() - started)
        assert not result.is_error, result.content[0].text
    return samples


async def startup(params: StdioServerParameters, first_call: tuple[str, dict] | None = None) -> tuple[float, float]:
    """Seconds from process start to the first tools/list answer, and to the first answer of
    `first_call` (for the soul graph: the graph has been read by then)."""
    started = time.perf_counter()
    async with Client(params) as client:
        await client.list_tools()
        listed = time.perf_counter() - started
        if first_call:
            result = await client.call_tool(*first_call)
            assert not result.is_error, result.content[0].text
        return listed, time.perf_counter() - started


def median_startup(params: StdioServerParameters, first_call: tuple[str, dict] | None = None) -> tuple[float, float]:
    runs = [asyncio.run(startup(params, first_call)) for _ in range(3)]
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


async def measure_server(params: StdioServerParameters, calls: dict[str, list[dict]]) -> dict[str, list[float]]:
    async with Client(params) as client:
        await client.list_tools()
        # Warm up: the first call of each tool builds the SDK's validators.
        for name, argument_list in calls.items():
            await time_calls(client, name, argument_list[:3])
        return {name: await time_calls(client, name, argument_list) for name, argument_list in calls.items()}


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    questions = synthetic.questions(max(args.calls, 2000))
    work = Path(tempfile.mkdtemp(prefix="soulbench-"))

    echo_script = work / "echo_server.py"
    echo_script.write_text(ECHO_SERVER)
    echo = StdioServerParameters(command=sys.executable, args=[str(echo_script)])
    base_start = median_startup(echo)[0]
    base_calls = asyncio.run(measure_server(echo, {"echo": [{"text": q} for q in questions[: args.calls]]}))["echo"]
    base_p50, base_p99 = percentile(base_calls, 0.5), percentile(base_calls, 0.99)

    print(f"python {sys.version.split()[0]}, baseline = do-nothing MCP server on the same SDK, stdio client")
    print(f"baseline: start {base_start:.3f} s, tools/call p50 {ms(base_p50)} ms, p99 {ms(base_p99)} ms\n")
    header = f"{'nodes':>7} | {'file MB':>7} | {'save s':>6} {'load s':>6} | {'start s':>7} {'x base':>6} {'1st answer s':>12} | " \
             f"{'query p50/p99 ms':>16} {'x base':>6} | {'related p50/p99 ms':>18} | {'add p50/p99 ms':>15} | " \
             f"{'link/pin/splay p50 ms':>21} | {'engine q/rel µs':>15}"
    print(header)
    print("-" * len(header))
    for size in sizes:
        graph = synthetic.build(size)
        soul_file = work / f"soul-{size}.json"
        started = time.perf_counter()
        SoulFile(soul_file).save(graph)
        save_seconds = time.perf_counter() - started
        started = time.perf_counter()
        SoulFile(soul_file).graph()
        load_seconds = time.perf_counter() - started

        engine_q, engine_r = [], []
        for q in questions[:2000]:
            t0 = time.perf_counter()
            tool_query(graph, q, 10)
            t1 = time.perf_counter()
            tool_related(graph, q, 10)
            engine_r.append(time.perf_counter() - t1)
            engine_q.append(t1 - t0)

        # The caller's environment, so PYTHONPATH can point the server at another checkout
        # (the SDK passes a stdio server only a few variables by default).
        params = StdioServerParameters(command=sys.executable, args=["-m", "soulgraph.mcp", "--soul-file", str(soul_file)],
                                       env=dict(os.environ))
        start, first_answer = median_startup(params, ("soul_summary", {}))
        calls = asyncio.run(measure_server(params, {
            "soul_query": [{"query": q} for q in questions[: args.calls]],
            "soul_related": [{"query": q} for q in questions[: args.calls]],
            "soul_add": [{"content": q, "tags": ["bench"]} for q in questions[: min(args.calls, 100)]],
            # The synthetic graph's edges all run from older (lower id) to newer nodes, so
            # an edge from n<i> to a much newer node never closes a cycle.
            "soul_link": [{"parent_id": f"n{i}", "child_id": f"n{size - i}"} for i in range(1, min(args.calls, 100) + 1)],
            "soul_pin": [{"node_id": f"n{i}", "pinned": bool(i % 2)} for i in range(1, min(args.calls, 100) + 1)],
            "soul_splay": [{"node_id": f"n{i}"} for i in range(1, min(args.calls, 100) + 1)],
        }))
        q50, q99 = percentile(calls["soul_query"], 0.5), percentile(calls["soul_query"], 0.99)
        r50, r99 = percentile(calls["soul_related"], 0.5), percentile(calls["soul_related"], 0.99)
        a50, a99 = percentile(calls["soul_add"], 0.5), percentile(calls["soul_add"], 0.99)
        size_mb = soul_file.stat().st_size / 1e6
        writes = "/".join(ms(percentile(calls[name], 0.5)) for name in ("soul_link", "soul_pin", "soul_splay"))
        row = (f"{size:>7} | {size_mb:>7.1f} | {save_seconds:>6.2f} {load_seconds:>6.2f} | {start:>7.3f} {start / base_start:>6.2f} {first_answer:>12.3f} | "
               f"{ms(q50) + '/' + ms(q99):>16} {q50 / base_p50:>6.2f} | {ms(r50) + '/' + ms(r99):>18} | "
               f"{ms(a50) + '/' + ms(a99):>15} | {writes:>21} | "
               f"{percentile(engine_q, 0.5) * 1e6:>7.1f}/{percentile(engine_r, 0.5) * 1e6:<7.1f}")
        print(row, flush=True)


if __name__ == "__main__":
    main()
