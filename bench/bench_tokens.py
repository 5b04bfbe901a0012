"""What the model receives from each soul tool, through Hermes' own code path (issue 13).

    .venv/bin/python bench/bench_tokens.py [--before 56d1285]

A real `hermes chat` session against the local model stub (tests/openai_stub.py): the stub's
first reply asks for one call of each tool below, Hermes runs them on our MCP server and
sends the results back in its next request; the characters of each `role: tool` message
there are what the model reads. Three arms, each on its own copy of one soul file (so every
arm answers from the same state):

- before: the runtime at `--before` (the commit before issue 13), as its installer wrote the
  Hermes entry;
- compact: this runtime without --structured-only (compact text beside structuredContent);
- after: this runtime as its installer writes the entry now (--structured-only).

The payload is the compact JSON of the tool's structured result, read with the MCP SDK
client on another copy: the ratio is model characters / payload characters (goal: ≤ 1.1).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from soulgraph.hermes.install import install  # noqa: E402
from soulgraph.server.answers import compact_json  # noqa: E402
from tests import hermes_chat, hermes_client  # noqa: E402
from tests.openai_stub import OpenAIStub, call, text_reply, tool_reply  # noqa: E402
from tests.seed_fixtures import write_home  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CALLS = [  # (tool, arguments): read tools and two writes, as an agent calls them
    ("soul_prime", {"context": "clean the staging disk"}),
    ("soul_related", {"query": "staging disk fills"}),
    ("soul_query", {"query": "backup config"}),
    ("soul_hot", {}),
    ("soul_discover", {"node_id": "n1"}),
    ("soul_by_tag", {"tag": "memory"}),
    ("soul_summary", {}),
    ("soul_add", {"content": "The staging disk was cleaned on Monday.", "tags": ["ops"]}),
    ("soul_explore", {"content": "The disk fills because of debug logging."}),
]


def runtime_at(commit: str, into: Path) -> Path:
    """The runtime package at `commit`, unpacked (a PYTHONPATH for the server)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "runtime/soulgraph"],
                             check=True, capture_output=True, timeout=60).stdout
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True, timeout=60)
    return into / "runtime"


OLD_SEED = """
import sys
from soulgraph.hermes.seed import seed_graph
from soulgraph.store import SoulFile
graph, _ = seed_graph(sys.argv[1])
SoulFile(sys.argv[2]).save(graph)
"""


def soul_of_old_runtime(old: Path, home: Path, out: Path) -> Path:
    """The same Hermes home seeded by the old runtime itself: it reads only its own schema."""
    subprocess.run([sys.executable, "-c", OLD_SEED, str(home), str(out)], check=True, capture_output=True,
                   timeout=120, env={**os.environ, "PYTHONPATH": str(old)})
    return out


def split_envelope(content: str) -> tuple[int, int]:
    """(all characters, the characters of the result inside Hermes' envelope). Hermes 0.19
    wraps every MCP result in `<untrusted_tool_result …>`, a notice and a blank line, and
    `</untrusted_tool_result>`: the same ~330 characters whatever the server answers."""
    inner = content
    if content.startswith("<untrusted_tool_result") and content.endswith("</untrusted_tool_result>"):
        inner = content.split("\n\n", 1)[1].removesuffix("\n</untrusted_tool_result>")
    return len(content), len(inner)


def hermes_arm(folder: Path, soul: Path, entry: dict) -> dict[str, tuple[int, int]]:
    """Characters of each tool result in the request Hermes sends after running the calls."""
    calls = [call(f"mcp__soul__{name}", args, id=f"call_{name}") for name, args in CALLS]
    with OpenAIStub([tool_reply(*calls), text_reply("Done.")]) as stub:
        home = hermes_chat.make_stub_home(folder / "home", stub.base_url)
        shutil.copy(soul, home / "soul.json")
        entry = json.loads(json.dumps(entry).replace("SOUL_FILE", str(home / "soul.json")))
        hermes_client.add_mcp_server(home, "soul", entry)
        run = hermes_chat.chat_once(home, "Look through your memory.", timeout=180)
        assert not run.timed_out, run
        for seen in stub.chat_requests:
            tools = [m for m in seen.body.get("messages", []) if m.get("role") == "tool"]
            if tools:
                return {m["tool_call_id"].removeprefix("call_"): split_envelope(m["content"]) for m in tools}
    raise RuntimeError(f"Hermes sent no tool results back; its output:\n{run}")


async def payloads(soul: Path) -> dict[str, int]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "soulgraph.mcp", "--soul-file", str(soul)])
    sizes = {}
    async with Client(params) as client:
        for name, args in CALLS:
            result = await client.call_tool(name, args)
            sizes[name] = len(compact_json(result.structured_content))
    return sizes


def print_row(name: str, row: dict[str, int]) -> None:
    print(f"{name:<14} {row['payload']:>8} {row['before']:>8} {row['compact']:>8} {row['after']:>8} "
          f"{row['before'] / row['payload']:>8.2f}x {row['after'] / row['payload']:>7.2f}x"
          f" {row['whole_before']:>13} {row['whole_after']:>12}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="56d1285", help="the commit before issue 13 (default: %(default)s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        source = write_home(folder / "seed-home")
        (source / "config.yaml").write_text("model:\n  default: x\n")
        install(source, python=sys.executable)  # a soul.json seeded as on a host
        soul = source / "soul.json"
        old = runtime_at(args.before, folder / "old")
        base = {"command": sys.executable, "tools": {"resources": False, "prompts": False}, "timeout": 60}
        arms = {
            "before": {**base, "args": ["-m", "soulgraph.mcp", "--soul-file", "SOUL_FILE"], "env": {"PYTHONPATH": str(old)}},
            "compact": {**base, "args": ["-m", "soulgraph.mcp", "--soul-file", "SOUL_FILE"]},
            "after": {**base, "args": ["-m", "soulgraph.mcp", "--soul-file", "SOUL_FILE", "--structured-only"]},
        }
        souls = {"before": soul_of_old_runtime(old, source, folder / "before-soul.json"), "compact": soul, "after": soul}
        seen = {name: hermes_arm(folder / name, souls[name], entry) for name, entry in arms.items()}
        copy = folder / "payload.json"
        shutil.copy(soul, copy)
        sizes = asyncio.run(payloads(copy))
    print(f"characters the model receives per tool result, through Hermes {hermes_client.HERMES_REQUIREMENT} "
          f"(before = {args.before}); the result inside Hermes' envelope, and the whole message")
    header = (f"{'tool':<14} {'payload':>8} {'before':>8} {'compact':>8} {'after':>8} {'before/p':>9} {'after/p':>8}"
              f" {'whole before':>13} {'whole after':>12}")
    print(header)
    print("-" * len(header))
    totals = {"payload": 0, "before": 0, "compact": 0, "after": 0, "whole_before": 0, "whole_after": 0}
    for name, _ in CALLS:
        row = {"payload": sizes[name], **{arm: seen[arm][name][1] for arm in arms},
               "whole_before": seen["before"][name][0], "whole_after": seen["after"][name][0]}
        for key in totals:
            totals[key] += row[key]
        print_row(name, row)
    print("-" * len(header))
    print_row("all", totals)
    envelope = seen["after"]["soul_hot"][0] - seen["after"]["soul_hot"][1]
    print(f"Hermes' envelope around each result: {envelope} characters (the same for every server)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
