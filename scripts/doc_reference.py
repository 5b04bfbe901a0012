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
        "list", "search", "show", "history", "edit", "supersede", "pin", "unpin", "archive", "unarchive", "forget", "users",
        "share", "forget-user", "flagged", "release", "consolidate", "serve")],
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


# ----------------------------------------------------------------------------- config.md
# What each inventory variable means; the sample fails when fleet/inventory.py's DEFAULTS
# gains or loses a key this does not describe.
INVENTORY_MEANINGS = {
    "address": "the host name or IP SSH connects to (default: the host's name in the inventory)",
    "port": "SSH port",
    "user": "SSH user (unset: ~/.ssh/config's, else yours)",
    "key": "SSH private key file (unset: ~/.ssh/config's IdentityFile, else ssh-agent and ~/.ssh)",
    "known_hosts": "the known_hosts file host keys are checked against: the only source of trust",
    "accept_new_host_key": "trust and record the key of a host not yet in known_hosts (never a changed key)",
    "platform": "linux or macos; detected from the host when unset",
    "hermes_home": "the Hermes home the runtime is installed into (`local`: $HERMES_HOME, else ~/.hermes)",
    "runtime_dir": "where the releases, the `current` link and the run lock live on the host",
    "python": "the host's Python (3.11 or newer) the release venvs are made with",
    "gateway_restart_command": "a command of your own that restarts the gateway, instead of systemd's or launchd's",
    "gateway_status_command": "with a restart command of your own: a command that exits 0 when the gateway runs",
    "soul_toolsets": "the MCP toolsets Hermes' entry serves: graph, graph,memory, graph,markdown or graph,memory,markdown",
    "soul_memory_provider": "auto (install the memory provider; select it unless config.yaml names another), "
                            "soulgraph (select it even then) or none (leave plugins and memory.provider alone)",
    "soul_embed": "true: the release venv gets the `embed` extra (numpy and the model), and recall fuses vectors "
                  "into search for questions; false: words and links only",
}


def config_inventory(session) -> str:
    """docs/reference/config.md: every host variable with its default and meaning."""
    from doc_samples import SampleError
    from fleet import inventory as inv
    keys = set(inv.HOST_KEYS)
    if keys != set(INVENTORY_MEANINGS):
        raise SampleError(f"fleet/inventory.py's host keys {sorted(keys ^ set(INVENTORY_MEANINGS))} are not "
                          "(or no longer) described in scripts/doc_reference.py's INVENTORY_MEANINGS")
    import yaml
    lines = ["# Every host's variables (fleet/inventory.py DEFAULTS), each with its default.",
             "# Set under a group's vars (inherited by child groups and hosts) or a host's own (which win).", ""]
    defaults = {"address": "<the host's name>", **inv.DEFAULTS}
    for key in ["address", *inv.DEFAULTS]:
        lines.append(f"# {INVENTORY_MEANINGS[key]}")
        value = defaults[key]
        shown = value if isinstance(value, str) and value.startswith("<") else \
            yaml.safe_dump({key: value}, default_flow_style=True).strip()[1:-1].split(": ", 1)[1]
        lines.append(f"{key}: {shown}")
    lines += ["", "# Accepted values", f"# platform: {', '.join(inv.PLATFORMS)}",
              f"# soul_memory_provider: {', '.join(inv.MEMORY_PROVIDER_CHOICES)}",
              "# Ansible's names for the connection variables, read as these:"]
    lines += [f"#   {theirs} -> {ours}" for theirs, ours in inv.ANSIBLE_NAMES.items()]
    lines += [f"# A group's keys: {', '.join(sorted(inv.GROUP_KEYS))}; any other variable is passed to the roles' templates."]
    return "\n".join(lines) + "\n"


def config_inventory_resolved(session) -> str:
    """docs/reference/config.md: what two hosts of inventory.example get, defaults filled in."""
    from doc_samples import ROOT
    session.run(f"cp {ROOT}/inventory.example ~/inventory.yml", shown="cp /opt/soulfleet/inventory.example ~/inventory.yml")
    code = ("import json, sys; from fleet import inventory; hosts = inventory.load(sys.argv[1]).hosts; "
            "print(json.dumps({name: {'groups': hosts[name].groups, 'vars': dict(sorted(hosts[name].vars.items()))} "
            "for name in sys.argv[2:]}, indent=2))")
    session.run(f'python -c "{code}" ~/inventory.yml mac-hub worker-3',
                shown="python -c 'from fleet import inventory; …print each host's vars…' ~/inventory.yml mac-hub worker-3")
    return session.text()


HERMES_CONFIG = """\
# Hermes configuration
model:
  default: anthropic/claude-sonnet
  provider: openrouter
"""
ENTRY_KEYS = {"command", "args", "tools", "enabled", "timeout", "connect_timeout"}


def config_hermes(session) -> str:
    """docs/reference/config.md: what the installer writes into a Hermes config.yaml."""
    from doc_samples import SampleError, _hermes_home
    home = _hermes_home(session, setup=False)
    (home / "config.yaml").write_text(HERMES_CONFIG, encoding="utf-8")
    session.run("cat ~/.hermes/config.yaml")
    session.run("python -m soulgraph.install --hermes-home ~/.hermes > install.json")
    session.run("cat ~/.hermes/config.yaml")
    import yaml
    written = yaml.safe_load((home / "config.yaml").read_text(encoding="utf-8"))
    if set(written["mcp_servers"]["soul"]) != ENTRY_KEYS:
        raise SampleError(f"the installer's entry has the keys {sorted(written['mcp_servers']['soul'])}; "
                          f"docs/reference/config.md describes {sorted(ENTRY_KEYS)}")
    session.run("python -m soulgraph.install --hermes-home ~/.hermes --toolsets graph,memory --mcp-scope telegram:1001"
                " > install.json")
    session.run("grep -A3 '^  soul:' ~/.hermes/config.yaml")
    return session.text()


def config_environment(session) -> str:
    """docs/reference/config.md: the environment variables the code reads, found in the source."""
    from doc_samples import ROOT, SampleError
    found = environment_variables(ROOT)
    unknown = sorted(set(found) - set(ENVIRONMENT))
    gone = sorted(set(ENVIRONMENT) - set(found))
    if unknown or gone:
        raise SampleError(f"environment variables not described: {unknown}; described but no longer read: {gone} "
                          "(scripts/doc_reference.py ENVIRONMENT)")
    lines = []
    for part, title in (("runtime", "Read by the runtime (on a host, and in every soulgraph command):"),
                        ("fleet", "Read by the operator's fleet and fleet-update:")):
        lines.append(title)
        for name in sorted(n for n in found if ENVIRONMENT[n][0] == part):
            lines.append(f"  {name}")
            lines.append(f"      {ENVIRONMENT[name][1]}")
            lines.append(f"      (read in {', '.join(sorted(found[name]))})")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


# name -> (who reads it, what it does)
ENVIRONMENT = {
    "HERMES_HOME": ("runtime", "the Hermes home: where soul.json (the default --soul-file), config.yaml, the memories and "
                               "the plugin are; unset: ~/.hermes. `fleet-update local` installs into it too."),
    "HOME": ("runtime", "the home ~/.hermes is under when HERMES_HOME is unset."),
    "VISUAL": ("runtime", "the editor `memories edit` opens without --content (first VISUAL, then EDITOR, then vi)."),
    "EDITOR": ("runtime", "the editor `memories edit` opens when VISUAL is unset."),
    "ANTHROPIC_API_KEY": ("runtime", "soul_ask's key for provider anthropic, read from the MCP server's environment "
                                     "at each call (Hermes passes an entry's env)."),
    "OPENAI_API_KEY": ("runtime", "soul_ask's key for provider openai (and any OpenAI-compatible base_url)."),
    "OPENBLAS_NUM_THREADS": ("runtime", "BLAS threads for the vectors: set to 1 when unset, before numpy loads (a "
                                        "value you set is kept)."),
    "OMP_NUM_THREADS": ("runtime", "as OPENBLAS_NUM_THREADS."),
    "MKL_NUM_THREADS": ("runtime", "as OPENBLAS_NUM_THREADS."),
    "VECLIB_MAXIMUM_THREADS": ("runtime", "as OPENBLAS_NUM_THREADS (macOS Accelerate)."),
    "SOULFLEET_SSH_CONFIG": ("fleet", "the OpenSSH client config whose Host blocks fill in what the inventory leaves "
                                      "unset (default ~/.ssh/config)."),
    "SOULFLEET_CACHE": ("fleet", "where built release wheels are kept, by sha (default ~/.cache/soulfleet)."),
    "XDG_STATE_HOME": ("fleet", "where the inventories' run locks are: $XDG_STATE_HOME/soulfleet/run-locks "
                                "(default ~/.local/state)."),
    "XDG_DATA_HOME": ("fleet", "where `fleet backup`, `fleet restore` and `fleet bootstrap --memory-from` keep the "
                               "hosts' soul backups without --dest: "
                               "$XDG_DATA_HOME/soulfleet/backups (default ~/.local/share)."),
}
_ENV_LINE = re.compile(r"environ|getenv|\benv\.get\(")
_CAPS = re.compile(r"""["']([A-Z][A-Z0-9_]{2,})["']""")
_CHILD = re.compile(r"""\{\*\*os\.environ,(.*)""")  # {**os.environ, "GIT_…": …}: set for a child, not read


def environment_variables(root) -> dict[str, set[str]]:
    """Each environment variable the runtime's and the fleet's code reads -> the files that read it:
    the names on a line that reads the environment (or the line before it: a loop's names), and
    the values of a table such a line indexes (os.environ.get(KEY_VARIABLES[provider]))."""
    found: dict[str, set[str]] = {}
    for folder in ("runtime/soulgraph", "fleet"):
        for path in sorted((root / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            lines = text.splitlines()
            shown = str(path.relative_to(root))
            for i, line in enumerate(lines):
                if not _ENV_LINE.search(line) or line.lstrip().startswith("#"):
                    continue
                line = _CHILD.sub("", line)
                names = _CAPS.findall(line)
                if "setdefault(" in line and i > 0:
                    names += _CAPS.findall(lines[i - 1])
                for table in re.findall(r"environ\.get\(([A-Z_]+)\[", line):
                    m = re.search(rf"^{table} = (.*)$", text, re.M)
                    names += re.findall(r'"([A-Z][A-Z0-9_]{2,})"', m.group(1)) if m else []
                if re.search(r"\benv(iron)?\.get\(\"HOME\"\)", line) or 'env.get("HOME")' in line:
                    names.append("HOME")
                for name in names:
                    found.setdefault(name, set()).add(shown)
    return found


SAMPLES["config-inventory"] = config_inventory
SAMPLES["config-inventory-resolved"] = config_inventory_resolved
SAMPLES["config-hermes"] = config_hermes
SAMPLES["config-environment"] = config_environment


# ----------------------------------------------------------------------------- files.md
# A small soul written through the library on a fixed clock (one minute a tick), so its files'
# times, and so the journal's checksums, are the same on every run.
FIXED_CLOCK_SOUL = """
import itertools, os
from soulgraph.memory.write import explore, remember
from soulgraph.store import SoulFile
from soulgraph.store.vectors import VectorStore, vectors_path

ticks = itertools.count(1_780_000_000.0, 60.0)  # 2026-05-28T20:26:40Z
soul = SoulFile(os.path.expanduser("~/.hermes/soul.json"), clock=lambda: next(ticks))
with soul.change() as graph:
    plan = remember(graph, "Rollout plan: one wheel per sha", ["project:fleet"], writer="tool:soul_add").node
soul.compact()
with soul.change() as graph:
    lesson = remember(graph, "Switch the runtime with an atomic symlink rename", ["lesson"], writer="tool:soul_add",
                      parents=[plan.id]).node
    graph.pin(lesson.id)
    explore(graph, "Maybe keep two releases for a rollback", ["idea"], parents=[lesson.id])
if VECTORS:
    vectors = VectorStore(vectors_path(soul.path), background=False)
    vectors.ready(soul.graph())
    vectors.nearest("rollout", 1)
    vectors.save()
"""


def _fixed_soul(session, vectors: bool = False) -> None:
    (session.home / ".hermes").mkdir(mode=0o700)
    session.python(FIXED_CLOCK_SOUL.replace("VECTORS", repr(vectors)))


def files_soul(session) -> str:
    """docs/reference/files.md: a soul's files, soul.json and its journal, then a compaction."""
    _fixed_soul(session)
    session.run("ls -l ~/.hermes")
    session.run("cat ~/.hermes/soul.json")
    session.run("cat ~/.hermes/soul.json.journal")
    session.run("python -m soulgraph.store compact ~/.hermes/soul.json > /dev/null")
    session.run("cat ~/.hermes/soul.json")
    session.run("cat ~/.hermes/soul.json.journal")
    return session.text()


VECTORS_LISTING = ("import numpy, sys; f = numpy.load(sys.argv[1]); "
                   "[print(f'{name:12} {f[name].dtype.str:5} {list(f[name].shape)}  {f[name].tolist() if f[name].size <= 3 else \"\"}') "
                   "for name in f.files]")


def files_vectors(session) -> str:
    """docs/reference/files.md: the vectors file's arrays (the `embed` extra)."""
    _fixed_soul(session, vectors=True)
    session.run("ls -l ~/.hermes/soul.json.vectors")
    import shlex
    session.run(f"python -c {shlex.quote(VECTORS_LISTING)} ~/.hermes/soul.json.vectors",
                shown="python -c 'import numpy; …each array: name, dtype, shape, values when short…' ~/.hermes/soul.json.vectors")
    return session.text()


def files_manifest_schema(session) -> str:
    """docs/reference/files.md: the soul repository manifest's JSON Schema, as shipped."""
    import json
    from doc_samples import ROOT
    path = ROOT / "runtime/soulgraph/soulrepo/layered-soul.v1.schema.json"
    return json.dumps(json.loads(path.read_text(encoding="utf-8")), indent=2, ensure_ascii=False) + "\n"


def files_manifest(session) -> str:
    """docs/reference/files.md: the manifest `soulrepo export` writes from a Hermes home."""
    from doc_samples import _hermes_home
    _hermes_home(session, setup=False)
    session.run("python -m soulgraph.soulrepo export --hermes-home ~/.hermes ~/soul-repo > export.json")
    session.run("cd ~/soul-repo && git ls-files", shown="git -C ~/soul-repo ls-files")
    session.run("cat ~/soul-repo/manifest.json")
    return session.text()


SAMPLES["files-soul"] = files_soul
SAMPLES["files-vectors"] = files_vectors
SAMPLES["files-manifest-schema"] = files_manifest_schema
SAMPLES["files-manifest"] = files_manifest
