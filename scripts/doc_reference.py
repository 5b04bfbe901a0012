"""The generated samples of the reference pages (docs/reference/): every command's `--help`,
every MCP tool's schemas, the configuration keys and the files on disk, each made by running
the code. `scripts/doc_samples.py` registers `SAMPLES` from here; tests/test_doc_samples.py
checks each marked block, and tests/test_doc_reference.py that the pages miss no command.
"""

from __future__ import annotations

import re
from typing import Callable

# ----------------------------------------------------------------------------- commands.md
# (sample name, the command as the page shows it). The name is "help-" and the words of the
# command after its program; every one is run with --help.
COMMANDS: list[tuple[str, str]] = [
    ("help-mcp", "python -m soulgraph.mcp"),
    ("help-check", "python -m soulgraph.check"),
    ("help-install", "python -m soulgraph.install"),
    ("help-seed", "python -m soulgraph.seed"),
    ("help-memory-service", "python -m soulgraph.hermes.memory_service"),
    ("help-memories", "python -m soulgraph.memories"),
    *[(f"help-memories-{sub}", f"python -m soulgraph.memories {sub}") for sub in (
        "list", "search", "show", "history", "edit", "pin", "unpin", "archive", "unarchive", "forget", "users",
        "share", "forget-user", "flagged", "release", "consolidate")],
    ("help-store", "python -m soulgraph.store"),
    *[(f"help-store-{sub}", f"python -m soulgraph.store {sub}") for sub in (
        "check", "compact", "export", "backup", "restore", "repair")],
    ("help-soulrepo", "python -m soulgraph.soulrepo"),
    *[(f"help-soulrepo-{sub}", f"python -m soulgraph.soulrepo {sub}") for sub in (
        "validate", "export", "import", "bundle")],
    ("help-eval", "python -m soulgraph.eval"),
    *[(f"help-eval-{sub}", f"python -m soulgraph.eval {sub}") for sub in (
        "ledger", "locomo", "supersede", "provider", "updates", "synth")],
    ("help-fleet-update-command", "fleet-update"),
    ("help-fleet", "fleet"),
    *[(f"help-fleet-{sub}", f"fleet {sub}") for sub in (
        "update", "bootstrap", "status", "verify", "backup", "restore", "memories", "soul")],
    ("help-fleet-soul-collect", "fleet soul collect"),
]

HELP_COLUMNS = "80"  # the width argparse and click wrap help to, as in a terminal


def _help(command: str) -> Callable:
    def sample(session) -> str:
        session.env["COLUMNS"] = HELP_COLUMNS
        session.run(f"{command} --help")
        return session.text()
    sample.__doc__ = f"docs/reference/commands.md: `{command} --help`."
    return sample


def subcommands(help_text: str) -> list[str]:
    """The subcommands a `--help` lists: argparse's, indented four spaces under the choices in
    "positional arguments:", or click's "Commands:" section."""
    found: list[str] = []
    section = None
    for line in help_text.splitlines():
        if line in ("positional arguments:", "Commands:"):
            section = line
            continue
        if section is None:
            continue
        if not line.strip():
            if found:
                break
            continue
        if not line.startswith(" "):
            section = None
            continue
        pattern = r"^    ([a-z][\w-]*)(\s|$)" if section == "positional arguments:" else r"^  ([a-z][\w-]*)(\s|$)"
        m = re.match(pattern, line)
        if m:
            found.append(m.group(1))
    return found


SAMPLES: dict[str, Callable] = {name: _help(command) for name, command in COMMANDS}


# ----------------------------------------------------------------------------- mcp-tools.md
# What an MCP client is told, asked of a real server over stdio (the SDK's client) serving every
# toolset on a fresh soul file. Printed as JSON by a set-up step; one listing serves every sample.
LISTING = """
import asyncio, json, os, sys
from mcp import Client
from mcp.client.stdio import StdioServerParameters

def dump(item):
    return item.model_dump(mode="json", by_alias=True, exclude_none=True)

async def main():
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "soulgraph.mcp", "--soul-file", os.path.expanduser("~/.hermes/soul.json"), "--toolsets", TOOLSETS],
        env=dict(os.environ))
    async with Client(params) as client:
        listing = {"server": dump(client.server_info), "instructions": client.instructions,
                   "tools": [dump(t) for t in (await client.list_tools()).tools],
                   "resources": [dump(r) for r in (await client.list_resources()).resources],
                   "resource_templates": [dump(r) for r in (await client.list_resource_templates()).resource_templates],
                   "prompts": [dump(p) for p in (await client.list_prompts()).prompts]}
        if READ:
            listing["read"] = {
                "resource": [dump(c) for c in (await client.read_resource("soul://snapshot")).contents],
                "prompt": dump(await client.get_prompt("soul_session_start", {"task": "roll out the next release"})),
                "prompt_bare": dump(await client.get_prompt("soul_session_start", {}))}
        print(json.dumps(listing))

asyncio.run(main())
"""

_LISTED: dict | None = None


def _toolsets():
    from soulgraph.server import toolsets  # names only: no MCP SDK loaded
    return toolsets


def _listing(session, *, read: bool = False) -> dict:
    """The server's tools, resources and prompts (every toolset); with `read`, also the
    resource's text and the prompt's messages on this session's soul."""
    global _LISTED
    import json
    if _LISTED is not None and not read:
        return _LISTED
    ts = _toolsets()
    if not (session.home / ".hermes").exists():
        (session.home / ".hermes").mkdir(mode=0o700)
    code = LISTING.replace("TOOLSETS", repr(",".join(ts.TOOLSETS))).replace("READ", repr(read))
    listed = json.loads(session.python(code))
    if not read:
        _LISTED = listed
    return listed


def _json(value) -> str:
    import json
    return json.dumps(value, indent=2, ensure_ascii=False)


def _sample_name(name: str) -> str:
    return "mcp-" + name.replace("_", "-")


def _shared_defs(listed: dict) -> dict:
    """The shapes the tools' schemas refer to ($defs), each the same wherever it appears."""
    from doc_samples import SampleError
    shapes: dict = {}
    for tool in listed["tools"]:
        for schema in ("inputSchema", "outputSchema"):
            for name, shape in tool.get(schema, {}).get("$defs", {}).items():
                if shapes.setdefault(name, shape) != shape:
                    raise SampleError(f"two tools' schemas define the shape {name!r} differently: show them apart")
    return dict(sorted(shapes.items()))


def mcp_server(session) -> str:
    """docs/reference/mcp-tools.md: the server's name, its instructions and its toolsets."""
    from doc_samples import SampleError
    listed = _listing(session)
    ts = _toolsets()
    served = [tool["name"] for tool in listed["tools"]]
    if sorted(served) != sorted(ts.tool_names(tuple(ts.TOOLSETS))):
        raise SampleError(f"the server lists {served}, the toolsets name {ts.tool_names(tuple(ts.TOOLSETS))}")
    lines = [f"server: {listed['server']['name']}", "", "instructions (sent at the handshake):",
             f"  {listed['instructions']}", "", "toolsets (--toolsets; graph is always served):"]
    for name, tools in ts.TOOLSETS.items():
        default = ", the default" if name in ts.DEFAULT_TOOLSETS else ""
        lines.append(f"  {name} ({len(tools)} tools{default}): {', '.join(tools)}")
    return "\n".join(lines) + "\n"


def _tool_sample(tool_name: str) -> Callable:
    def sample(session) -> str:
        from doc_samples import SampleError
        listed = _listing(session)
        tool = next((t for t in listed["tools"] if t["name"] == tool_name), None)
        if tool is None:
            raise SampleError(f"the server does not list {tool_name}")
        ts = _toolsets()
        toolset = next(name for name, tools in ts.TOOLSETS.items() if tool_name in tools)
        hints = ", ".join(f"{key} {str(value).lower()}" for key, value in tool.get("annotations", {}).items())
        lines = [f"{tool_name}  (toolset {toolset}; {hints})", "", tool.get("description", "").strip(), ""]
        for title, key in (("input schema", "inputSchema"), ("output schema", "outputSchema")):
            schema = {k: v for k, v in tool.get(key, {}).items() if k != "$defs"}
            refs = sorted(tool.get(key, {}).get("$defs", {}))
            lines.append(f"{title}" + (f" (shapes: {', '.join(refs)})" if refs else "") + ":")
            lines.append(_json(schema) if schema else "(none)")
            lines.append("")
        return "\n".join(lines).rstrip("\n") + "\n"
    sample.__doc__ = f"docs/reference/mcp-tools.md: the tool {tool_name} as a client lists it."
    return sample


def mcp_shapes(session) -> str:
    """docs/reference/mcp-tools.md: the shapes the schemas refer to as #/$defs/NAME."""
    return _json(_shared_defs(_listing(session))) + "\n"


def mcp_resource(session) -> str:
    """docs/reference/mcp-tools.md: the resource as listed, and its text on a small soul."""
    from doc_samples import _agent_home
    _agent_home(session)
    listed = _listing(session, read=True)
    lines = ["resources:", _json(listed["resources"]), "", "resource templates:", _json(listed["resource_templates"]),
             "", "soul://snapshot, read on a soul with a few memories:"]
    lines += [content.get("text", "") for content in listed["read"]["resource"]]
    return "\n".join(lines).rstrip("\n") + "\n"


def mcp_prompt(session) -> str:
    """docs/reference/mcp-tools.md: the prompt as listed, and its messages on a small soul."""
    from doc_samples import _agent_home
    _agent_home(session)
    listed = _listing(session, read=True)
    lines = ["prompts:", _json(listed["prompts"]), ""]
    for title, key in (('soul_session_start, task "roll out the next release":', "prompt"),
                       ("soul_session_start, no task:", "prompt_bare")):
        lines.append(title)
        for message in listed["read"][key]["messages"]:
            lines.append(f"[{message['role']}]")
            lines.append(message["content"].get("text", _json(message["content"])))
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


_ts = _toolsets()
SAMPLES["mcp-server"] = mcp_server
for _name in _ts.tool_names(tuple(_ts.TOOLSETS)):
    SAMPLES[_sample_name(_name)] = _tool_sample(_name)
SAMPLES["mcp-shapes"] = mcp_shapes
SAMPLES["mcp-resource"] = mcp_resource
SAMPLES["mcp-prompt"] = mcp_prompt
