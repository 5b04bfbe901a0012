"""Check that this runtime serves the soul graph: `python -m soulgraph.check [--soul-file PATH]`.

It starts `python -m soulgraph.mcp` with this interpreter, as Hermes would, connects
with the MCP SDK's own stdio client, lists the tools and asks `soul_summary` (a read:
the check never writes the soul file). Prints one JSON object; exits 0 only when the
server answered with exactly the expected tools. The fleet's import check runs it on
every host before switching to a new runtime.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from soulgraph.server.toolsets import DEFAULT_TOOLSETS, parse_toolsets, tool_names
from soulgraph.store import SoulFile, SoulFileError, default_soul_file


async def probe(soul_file: Path, timeout: float = 60.0, toolsets: tuple[str, ...] = DEFAULT_TOOLSETS) -> dict[str, Any]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "soulgraph.mcp", "--soul-file", str(soul_file),
                                                                 "--toolsets", ",".join(toolsets)])
    started = time.perf_counter()
    with_timeout = asyncio.timeout(timeout)
    async with with_timeout, Client(params) as client:
        tools = sorted(tool.name for tool in (await client.list_tools()).tools)
        ready = time.perf_counter() - started
        summary = await client.call_tool("soul_summary", {"limit": 3})
    report: dict[str, Any] = {
        "soul_file": str(soul_file),
        "python": sys.executable,
        "tools": tools,
        "tool_count": len(tools),
        "ready_seconds": round(ready, 3),
        "ok": tools == sorted(tool_names(toolsets)) and not summary.is_error,
    }
    if summary.is_error:
        report["error"] = summary.content[0].text
    else:
        content = summary.structured_content
        report["summary"] = {key: content[key] for key in ("nodes", "edges", "pinned", "hypotheses")}
        report["hot"] = [node["content"][:80] for node in content["hot"]]
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m soulgraph.check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--soul-file", type=Path, help="default: $HERMES_HOME/soul.json, else ~/.hermes/soul.json")
    parser.add_argument("--toolsets", type=parse_toolsets, default=DEFAULT_TOOLSETS,
                        help="the toolsets the server must serve, e.g. graph,memory (default: graph, 13 tools)")
    args = parser.parse_args(argv)
    soul_file = (args.soul_file or default_soul_file()).expanduser().absolute()
    try:
        SoulFile(soul_file).graph()  # the server would refuse this file: say why directly
        report = asyncio.run(probe(soul_file, toolsets=args.toolsets))
    except SoulFileError as exc:
        report = {"soul_file": str(soul_file), "python": sys.executable, "ok": False, "error": str(exc)}
    except Exception as exc:  # the server did not come up: say why, as JSON like the rest
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        report = {"soul_file": str(soul_file), "python": sys.executable, "ok": False,
                  "error": f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__}
    print(json.dumps(report, indent=2))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
