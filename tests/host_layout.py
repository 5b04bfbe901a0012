"""Lay out a lab host by hand exactly as the fleet's host layout says, without the fleet core.

    <runtime_dir>/releases/<sha>/{wheels/, venv/}   <runtime_dir>/current -> releases/<sha>
    <hermes_home>/config.yaml with mcp_servers.soul, soul.json (0600), skills/soul-graph/SKILL.md

The runtime's wheel and a wheelhouse of its dependencies are built once on the operator (cached
under .cache/, keyed by the runtime's sources), shipped over SSH, and installed on the host as its
user with the host's /usr/bin/python3 and no package index, as a deploy would.
"""

from __future__ import annotations

import hashlib
import posixpath
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from fleet.connections.ssh import SSHConnection

REPO = Path(__file__).resolve().parent.parent
RUNTIME = REPO / "runtime"
CACHE = REPO / ".cache"
HOST_PYTHON = "/usr/bin/python3"
# A host has no pip configuration of ours; the operator's index settings must not leak into it.
CLEAN_PIP = "PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1"
MINIMAL_CONFIG = "model:\n  default: test-model\n"


def runtime_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(RUNTIME.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and ".egg-info" not in str(path):
            digest.update(str(path.relative_to(RUNTIME)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def build_wheelhouse() -> Path:
    """The runtime wheel plus every dependency as wheels; built once per runtime source."""
    wheelhouse = CACHE / f"wheelhouse-{runtime_digest()}"
    if (wheelhouse / ".complete").exists():
        return wheelhouse
    partial = wheelhouse.with_name(wheelhouse.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
                    "--wheel-dir", str(partial), str(RUNTIME)], check=True,
                   stdout=subprocess.DEVNULL)
    (partial / ".complete").touch()
    shutil.rmtree(wheelhouse, ignore_errors=True)
    partial.rename(wheelhouse)
    return wheelhouse


def connect(lab_host) -> SSHConnection:
    return SSHConnection(lab_host.name, lab_host.address, port=lab_host.port, user=lab_host.user,
                         key=lab_host.key, known_hosts=lab_host.known_hosts).connect()


def home_of(conn) -> str:
    return conn.run('printf "%s" "$HOME"', check=True).stdout


def deploy_runtime(conn, wheelhouse: Path, sha: str, runtime_dir: str) -> str:
    """Ship the wheelhouse, build releases/<sha>/venv, switch `current`; returns its python."""
    release = posixpath.join(runtime_dir, "releases", sha)
    wheels = posixpath.join(release, "wheels")
    conn.run(f"mkdir -p {shlex.quote(wheels)}", check=True)
    for wheel in sorted(wheelhouse.glob("*.whl")):
        conn.put(wheel.read_bytes(), posixpath.join(wheels, wheel.name), mode=0o644)
    venv = posixpath.join(release, "venv")
    python = posixpath.join(venv, "bin", "python")
    conn.run(f"{HOST_PYTHON} -m venv {shlex.quote(venv)} && {CLEAN_PIP} {shlex.quote(python)} -m pip "
             f"install --quiet --no-index --find-links {shlex.quote(wheels)} soulgraph",
             check=True, timeout=300)
    switch_current(conn, runtime_dir, sha)
    return python


def switch_current(conn, runtime_dir: str, sha: str) -> None:
    # A new link renamed over the old one: `current` always points at a whole release.
    current = posixpath.join(runtime_dir, "current")
    conn.run(f"ln -sfn {shlex.quote('releases/' + sha)} {shlex.quote(current + '.new')} && "
             f"mv -T {shlex.quote(current + '.new')} {shlex.quote(current)}", check=True)


def make_hermes_home(conn, hermes_home: str, config: str = MINIMAL_CONFIG) -> None:
    """A Hermes home with a config.yaml, owned by the host's user (as Hermes' setup leaves it)."""
    conn.run(f"mkdir -p {shlex.quote(hermes_home)}", check=True)
    conn.put(config.encode(), posixpath.join(hermes_home, "config.yaml"), mode=0o644)


def install_into_hermes(conn, hermes_home: str, python: str, server_python: str | None = None) -> str:
    """The runtime's own installer: MCP entry, seeded soul.json, SKILL.md. Returns its JSON.

    `server_python` is what the entry's command will name (default: `python` itself).
    """
    return conn.run(f"{shlex.quote(python)} -m soulgraph.install --hermes-home "
                    f"{shlex.quote(hermes_home)} --python {shlex.quote(server_python or python)}",
                    check=True, timeout=120).stdout


def lay_out_host(lab_host, wheelhouse: Path, sha: str) -> dict[str, str]:
    """The whole layout at the default places (~/.soulfleet, ~/.hermes); returns its paths."""
    with connect(lab_host) as conn:
        home = home_of(conn)
        runtime_dir = posixpath.join(home, ".soulfleet")
        hermes_home = posixpath.join(home, ".hermes")
        python = deploy_runtime(conn, wheelhouse, sha, runtime_dir)
        make_hermes_home(conn, hermes_home)
        install_into_hermes(conn, hermes_home, python)
    return {"home": home, "runtime_dir": runtime_dir, "hermes_home": hermes_home, "python": python}
