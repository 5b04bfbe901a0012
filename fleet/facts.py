"""Facts: what a host is like, gathered in one round trip before any task runs.

Each fact is a small class: a shell command and a parser for its output. `gather` joins every
fact's command into one script, separated by marker lines, so a host costs one SSH exchange
however many facts there are.
"""

from __future__ import annotations

import shlex
from typing import Any

from fleet.connections import Connection

MARK = "::soulfleet-fact::"


def sh_path(path: str) -> str:
    """A path for the host's shell: quoted, with a leading ~ expanded by the shell itself."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def file_reading_command(path: str) -> str:
    """Shell printing a file's inode, size, mtime (to the nanosecond), mode and owner, following
    links: GNU stat, else BSD's (macOS); "missing" when there is no such file. `path` is already
    quoted for the shell (or a "$variable"). The installer writes the same readings in its record
    (runtime/soulgraph/hermes/install_record.py)."""
    return (f"stat -L -c '%i %s %.9Y %a %u' {path} 2>/dev/null || "
            f"stat -L -f '%i %z %Fm %Lp %u' {path} 2>/dev/null || echo missing")


class Fact:
    name = ""

    def command(self, hvars: dict[str, Any]) -> str:
        raise NotImplementedError

    def parse(self, out: str) -> Any:
        return out.strip()


class Home(Fact):
    name = "home"

    def command(self, hvars):
        return 'printf "%s\\n" "$HOME"'


class Uname(Fact):
    """OS kernel and machine: Linux x86_64, Darwin arm64, ..."""
    name = "uname"

    def command(self, hvars):
        return "uname -s; uname -m"

    def parse(self, out):
        lines = out.split()
        return {"os": lines[0] if lines else "", "arch": lines[1] if len(lines) > 1 else ""}


class SwVers(Fact):
    """Only macOS has sw_vers: its presence is how we tell macOS apart."""
    name = "has_sw_vers"

    def command(self, hvars):
        return "command -v sw_vers >/dev/null 2>&1 && echo yes || echo no"

    def parse(self, out):
        return out.strip() == "yes"


class Uid(Fact):
    name = "uid"

    def command(self, hvars):
        return "id -u"

    def parse(self, out):
        return int(out.strip()) if out.strip().isdigit() else None


class PythonVersion(Fact):
    """The host Python the runtime venv is made with; None when it is missing."""
    name = "python_version"

    def command(self, hvars):
        py = sh_path(hvars["python"])
        return (f"{py} -S -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])' 2>/dev/null"
                " || echo none")

    def parse(self, out):
        value = out.strip()
        return None if value in ("", "none") else value


class HermesHome(Fact):
    name = "hermes"

    def command(self, hvars):
        home = sh_path(hvars["hermes_home"])
        return (f"test -d {home} && echo home || echo nohome; "
                f"test -f {home}/config.yaml && echo config || echo noconfig")

    def parse(self, out):
        words = out.split()
        return {"home_exists": "home" in words, "config_exists": "config" in words}


class DeployedSha(Fact):
    """The release `current` points at, or None before the first deploy."""
    name = "deployed_sha"

    def command(self, hvars):
        return f"readlink {sh_path(hvars['runtime_dir'])}/current 2>/dev/null || true"

    def parse(self, out):
        target = out.strip().rstrip("/")
        return target.rsplit("/", 1)[-1] if target else None


class ActiveProfile(Fact):
    """The first line of the Hermes root's active_profile file ('' when there is none)."""
    name = "active_profile"

    def command(self, hvars):
        from fleet.hermes_names import profile_command

        return profile_command(sh_path(hvars["hermes_home"]))


class GatewayRuntime(Fact):
    """The sha the gateway was last restarted onto by a run (roles/gateway), or None."""
    name = "gateway_runtime"

    def command(self, hvars):
        return f"cat {sh_path(hvars['runtime_dir'])}/gateway-runtime 2>/dev/null || true"

    def parse(self, out):
        value = out.strip()
        return value or None


class HermesEntrySha(Fact):
    """The release Hermes' soul entry runs (the sha in its `releases/<sha>/venv/bin/python`), or
    None: after a run that stopped between the switch and the entry, it differs from `current`."""
    name = "entry_sha"

    def command(self, hvars):
        config = sh_path(f"{hvars['hermes_home']}/config.yaml")
        return f"grep -o 'releases/[0-9a-f]*/venv/bin/python' {config} 2>/dev/null | head -n 1 || true"

    def parse(self, out):
        parts = out.strip().split("/")
        return parts[1] if len(parts) > 2 and parts[1] else None


ALL_FACTS: list[Fact] = [Home(), Uname(), SwVers(), Uid(), PythonVersion(), HermesHome(),
                         DeployedSha(), GatewayRuntime(), ActiveProfile(), HermesEntrySha()]


def gather(conn: Connection, hvars: dict[str, Any], facts: list[Fact] = ALL_FACTS) -> dict:
    script = "; ".join(f"echo '{MARK}{fact.name}'; {{ {fact.command(hvars)}; }}" for fact in facts)
    result = conn.run(script, timeout=60)
    chunks: dict[str, list[str]] = {}
    current = None
    for line in result.stdout.splitlines():
        if line.startswith(MARK):
            current = line[len(MARK):]
            chunks[current] = []
        elif current is not None:
            chunks[current].append(line)
    gathered = {fact.name: fact.parse("\n".join(chunks.get(fact.name, []))) for fact in facts}
    return derive(gathered, hvars)


def derive(f: dict, hvars: dict[str, Any]) -> dict:
    """Facts worked out from the raw ones: platform (unless the inventory says), paths."""
    f["os"], f["arch"] = f["uname"]["os"], f["uname"]["arch"]
    detected = "macos" if f["has_sw_vers"] or f["os"] == "Darwin" else "linux"
    f["platform"] = hvars.get("platform") or detected
    f.update(f.pop("hermes"))
    return f


def expand_home(path: str, home: str) -> str:
    """~/x on the host, as an absolute path (the Hermes entry must not depend on a shell)."""
    if path == "~":
        return home
    if path.startswith("~/"):
        return home.rstrip("/") + "/" + path[2:]
    return path
