"""Drive the real Hermes CLI (PyPI ``hermes-agent``) from tests and host checks.

Hermes lives in a venv of its own (it pins mcp 1.x; our dev env has mcp 2.x).
Everything here talks to it only through its command line, with a clean
environment, and parses what it prints: several Hermes commands exit 0 even
when they fail, so the output is the only reliable signal.

Facts behind the parsers are written down in docs/hermes-facts.md.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERMES_VERSION = "0.19.0"
HERMES_REQUIREMENT = f"hermes-agent[mcp]=={HERMES_VERSION}"
# Installed beside it: aiohttp runs Hermes' API server and webhook adapters
# (`hermes gateway run`); hermes-agent pins this version in its messaging extras.
HERMES_EXTRA_REQUIREMENTS = ("aiohttp==3.14.1",)
HERMES_REQUIREMENTS = (HERMES_REQUIREMENT, *HERMES_EXTRA_REQUIREMENTS)
# Written last by ensure_hermes_venv: their presence with the right content means
# the venv is complete, so reuse costs two small file reads. The extras have a
# marker of their own: a venv holding Hermes alone gets them installed in place,
# and a checkout that knows only the first marker still takes the venv as its own.
MARKER_NAME = ".soulfleet-hermes"
EXTRAS_MARKER_NAME = ".soulfleet-hermes-extras"
EXTRAS_MARKER_TEXT = " ".join(HERMES_EXTRA_REQUIREMENTS)
INSTALL_TIMEOUT = 900

# A dead loopback port: any HTTP(S) a Hermes command tries (update check,
# OSV lookup) fails at once instead of leaving the machine.
_DEAD_PROXY = "http://127.0.0.1:9"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


class HermesUnavailable(RuntimeError):
    """The Hermes venv could not be created (no index, no network, ...)."""


# --------------------------------------------------------------------------
# The venv
# --------------------------------------------------------------------------

def hermes_venv_dir() -> Path:
    env = os.environ.get("SOULFLEET_HERMES_VENV", "").strip()
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "soulfleet" / "hermes-venv"


def _uv_binary() -> str | None:
    """uv if the dev env has it (PyPI `uv`): ~20x faster than pip here."""
    if os.environ.get("SOULFLEET_HERMES_INSTALLER", "").strip() == "pip":
        return None
    try:
        from uv import find_uv_bin  # the PyPI wheel ships the binary

        return find_uv_bin()
    except Exception:
        return shutil.which("uv")


def _marker_ok(venv: Path, name: str = MARKER_NAME, text: str = HERMES_REQUIREMENT) -> bool:
    try:
        ok = (venv / name).read_text().strip() == text
    except OSError:
        return False
    return ok and (venv / "bin" / "hermes").exists()


def _complete(venv: Path) -> bool:
    return _marker_ok(venv) and _marker_ok(venv, EXTRAS_MARKER_NAME, EXTRAS_MARKER_TEXT)


def _run_install(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        raise HermesUnavailable(f"{' '.join(cmd[:3])} ... failed:\n" + "\n".join(tail))


def ensure_hermes_venv() -> Path:
    """Return the `hermes` executable of a venv holding HERMES_REQUIREMENTS.

    Created once and cached in $SOULFLEET_HERMES_VENV (else
    ~/.cache/soulfleet/hermes-venv). Its Python is the sibling `python`.
    Raises HermesUnavailable when it cannot be built.
    """
    venv = hermes_venv_dir()
    hermes = venv / "bin" / "hermes"
    if _complete(venv):
        return hermes
    venv.parent.mkdir(parents=True, exist_ok=True)
    # A lock beside the venv: parallel test processes build it only once.
    # The venv is built in place (its scripts hard-code their own path, so it
    # cannot be built elsewhere and renamed); the markers are written last.
    with open(venv.parent / (venv.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _complete(venv):
            return hermes
        uv = _uv_binary()
        try:
            if _marker_ok(venv):
                # Hermes is there: only the extras are missing. Installed in place, so a
                # test using the venv meanwhile keeps working.
                _install(uv, venv, HERMES_EXTRA_REQUIREMENTS)
            else:
                shutil.rmtree(venv, ignore_errors=True)
                if uv:
                    _run_install([uv, "venv", "--quiet", "--python", sys.executable, str(venv)])
                else:
                    _run_install([sys.executable, "-m", "venv", str(venv)])
                _install(uv, venv, HERMES_REQUIREMENTS)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise HermesUnavailable(f"cannot build the Hermes venv in {venv}: {exc}") from exc
        if not hermes.exists():
            raise HermesUnavailable(f"{hermes} missing after installing {HERMES_REQUIREMENT}")
        (venv / MARKER_NAME).write_text(HERMES_REQUIREMENT + "\n")
        (venv / EXTRAS_MARKER_NAME).write_text(EXTRAS_MARKER_TEXT + "\n")
    return hermes


def _install(uv: str | None, venv: Path, requirements: tuple[str, ...]) -> None:
    python = str(venv / "bin" / "python")
    if uv:
        _run_install([uv, "pip", "install", "--quiet", "--python", python, *requirements])
    else:
        _run_install([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirements])


# --------------------------------------------------------------------------
# Running it
# --------------------------------------------------------------------------

_sandbox_user_home: Path | None = None


def _default_user_home() -> Path:
    """A throwaway $HOME per process: Hermes must never touch the real ~/.hermes."""
    global _sandbox_user_home
    if _sandbox_user_home is None:
        _sandbox_user_home = Path(tempfile.mkdtemp(prefix="soulfleet-hermes-user-"))
    return _sandbox_user_home


def hermes_env(home: Path, *, user_home: Path | None = None,
               extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """The clean environment a Hermes command runs in (no provider keys)."""
    hermes_bin = ensure_hermes_venv().parent
    env = {
        "PATH": f"{hermes_bin}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(user_home or _default_user_home()),
        "USER": os.environ.get("USER", "root"),
        "LANG": "C.UTF-8",
        "HERMES_HOME": str(home),
        # Never pip-install optional backends on the fly.
        "HERMES_DISABLE_LAZY_INSTALLS": "1",
        # Wide, colourless output: rich tables must not wrap skill names.
        "COLUMNS": "250",
        "NO_COLOR": "1",
        "TERM": "dumb",
        # `hermes version` asks PyPI for updates; npx/uvx servers trigger an
        # OSV lookup. Both fail fast and fail open through a dead proxy.
        "OSV_ENDPOINT": f"{_DEAD_PROXY}/v1/query",
        "NO_PROXY": "localhost,127.0.0.1,::1",
        "no_proxy": "localhost,127.0.0.1,::1",
    }
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        env[var] = _DEAD_PROXY
    if extra_env:
        env.update(extra_env)
    return env


def run_hermes(home: Path | str, *args: str, timeout: float = 120,
               input: str | None = None, user_home: Path | None = None,
               extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run `hermes ARGS` with HERMES_HOME=home; never raises on exit status."""
    hermes = ensure_hermes_venv()
    return subprocess.run(
        [str(hermes), *args],
        env=hermes_env(Path(home), user_home=user_home, extra_env=extra_env),
        input=input if input is not None else "",  # no TTY: never a prompt
        capture_output=True, text=True, timeout=timeout,
    )


def _output(proc: subprocess.CompletedProcess) -> str:
    return _ANSI.sub("", (proc.stdout or "") + (proc.stderr or ""))


def make_hermes_home(directory: Path | str) -> Path:
    """A fresh Hermes home written by Hermes itself.

    `hermes setup --reset --non-interactive` saves Hermes' DEFAULT_CONFIG
    (config.yaml holds `_config_version` plus commented sections) and creates
    the directory skeleton and a default SOUL.md. Setup then copies the file it
    just wrote to config.yaml.bak.<timestamp>; that byte-identical copy is
    removed so the home holds no backup we did not ask for.
    """
    home = Path(directory)
    if (home / "config.yaml").exists():
        raise FileExistsError(f"{home / 'config.yaml'} exists: not a fresh home")
    proc = run_hermes(home, "setup", "--reset", "--non-interactive")
    config = home / "config.yaml"
    if not config.is_file():
        raise RuntimeError(f"hermes setup did not create {config}:\n{_output(proc)}")
    data = config.read_bytes()
    for bak in home.glob("config.yaml.bak.*"):
        if bak.read_bytes() == data:
            bak.unlink()
    return home


def add_mcp_server(home: Path | str, name: str, entry: dict) -> None:
    """Set config.yaml `mcp_servers.<name>` (round-trip YAML keeps the rest)."""
    from ruamel.yaml import YAML

    yaml = YAML()
    path = Path(home) / "config.yaml"
    data = yaml.load(path.read_text()) if path.exists() else None
    if data is None:
        data = {}
    servers = data.setdefault("mcp_servers", {})
    if servers is None:
        servers = data["mcp_servers"] = {}
    servers[name] = entry
    with path.open("w") as fh:
        yaml.dump(data, fh)


# --------------------------------------------------------------------------
# Parsers
# --------------------------------------------------------------------------

@dataclass
class McpTestReport:
    name: str
    connected: bool
    tools_discovered: int | None
    tools: list[str]
    elapsed_ms: int | None
    error: str | None  # "Connection failed" detail, or "not found in config"
    returncode: int
    output: str


_CONNECTED = re.compile(r"✓ Connected \((\d+)ms\)")
_DISCOVERED = re.compile(r"✓ Tools discovered: (\d+)")
_FAILED = re.compile(r"✗ Connection failed \((\d+)ms\): ?(.*)")
_NOT_FOUND = re.compile(r"✗ Server '(.*)' not found in config\.")


def parse_mcp_test(name: str, output: str, returncode: int = 0) -> McpTestReport:
    connected = _CONNECTED.search(output)
    discovered = _DISCOVERED.search(output)
    failed = _FAILED.search(output)
    error = None
    if failed:
        error = failed.group(2).strip() or "connection failed"
    elif _NOT_FOUND.search(output):
        error = "not found in config"
    elif not connected:
        error = "no '✓ Connected' line in the output"
    tools: list[str] = []
    if discovered:
        # After "Tools discovered", one indented line per tool: name, description.
        for line in output[discovered.end():].splitlines()[1:]:
            if not line.strip():
                if tools:
                    break
                continue
            if not line.startswith("    "):
                break
            tools.append(line.split(None, 1)[0])
    elapsed = connected or failed
    return McpTestReport(
        name=name,
        connected=bool(connected) and not failed,
        tools_discovered=int(discovered.group(1)) if discovered else None,
        tools=tools,
        elapsed_ms=int(elapsed.group(1)) if elapsed else None,
        error=error,
        returncode=returncode,
        output=output,
    )


def mcp_test(home: Path | str, name: str, *, timeout: float = 120) -> McpTestReport:
    """`hermes mcp test NAME`, read from its output (it exits 0 on failure)."""
    proc = run_hermes(home, "mcp", "test", name, timeout=timeout)
    return parse_mcp_test(name, _output(proc), proc.returncode)


# What the agent itself would register: no CLI command connects and lists the
# prefixed tool names, so ask Hermes' own discovery (its public entry points
# discover_mcp_tools / shutdown_mcp_servers) in its own Python.
_REGISTERED_SNIPPET = """
import json
from tools.mcp_tool import discover_mcp_tools, shutdown_mcp_servers
from tools.registry import registry
names = sorted(discover_mcp_tools())
print("SOULFLEET-TOOLS " + json.dumps({n: registry.get_toolset_for_tool(n) for n in names}))
shutdown_mcp_servers()
"""


def registered_mcp_tools(home: Path | str, *, timeout: float = 120) -> dict[str, str]:
    """{tool name as the agent sees it: toolset}, e.g. mcp__soul__soul_add: mcp-soul."""
    python = ensure_hermes_venv().parent / "python"
    proc = subprocess.run([str(python), "-c", _REGISTERED_SNIPPET],
                          env=hermes_env(Path(home)), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    for line in proc.stdout.splitlines():
        if line.startswith("SOULFLEET-TOOLS "):
            return json.loads(line.split(" ", 1)[1])
    raise RuntimeError(f"Hermes tool discovery failed:\n{_output(proc)}")


@dataclass
class McpServerRow:
    name: str
    transport: str
    tools: str  # "all", "N selected" or "-N excluded"
    enabled: bool


@dataclass
class McpListReport:
    servers: list[McpServerRow]
    output: str

    def get(self, name: str) -> McpServerRow | None:
        return next((s for s in self.servers if s.name == name), None)


_LIST_ROW = re.compile(
    r"^  (?P<name>\S+)\s+(?P<transport>.*?)\s+(?P<tools>all|\d+ selected|-\d+ excluded)"
    r"\s+(?P<status>✓ enabled|✗ disabled)\s*$"
)


def parse_mcp_list(output: str) -> McpListReport:
    rows = []
    for line in output.splitlines():
        m = _LIST_ROW.match(line)
        if m:
            rows.append(McpServerRow(m["name"], m["transport"], m["tools"],
                                     m["status"].endswith("enabled")))
    return McpListReport(rows, output)


def mcp_list(home: Path | str) -> McpListReport:
    """`hermes mcp list` (reads config.yaml only; starts no server)."""
    return parse_mcp_list(_output(run_hermes(home, "mcp", "list")))


@dataclass
class SkillRow:
    name: str
    category: str
    source: str
    trust: str
    status: str


@dataclass
class SkillsListReport:
    skills: list[SkillRow]
    output: str

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.skills]


def parse_skills_list(output: str) -> SkillsListReport:
    rows = []
    for line in output.splitlines():
        # Body rows of rich's table: │ Name │ Category │ Source │ Trust │ Status │
        if not line.startswith("│"):
            continue
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if len(cells) != 5 or cells[0] == "Name":
            continue
        rows.append(SkillRow(*cells))
    return SkillsListReport(rows, output)


def skills_list(home: Path | str) -> SkillsListReport:
    """`hermes skills list`: the skills Hermes finds under <home>/skills."""
    return parse_skills_list(_output(run_hermes(home, "skills", "list")))
