"""What verification needs to know about one host, and where the fixed layout puts things there."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Callable

GATEWAY_VARS = ("gateway_restart_command", "gateway_status_command", "gateway_unit", "gateway_label")
DEFAULT_HERMES_HOME = "~/.hermes"
DEFAULT_RUNTIME_DIR = "~/.soulfleet"


@dataclass(frozen=True)
class VerifyTarget:
    """One host to verify. The fleet core maps its inventory hosts to these.

    `local=True` checks this machine through testinfra's local backend (address, port, user,
    key and known_hosts are then ignored). Paths may start with `~/`: it means the home of the
    user the checks run as on that host.
    """

    name: str
    address: str = ""
    port: int = 22
    user: str | None = None
    key: str | None = None
    known_hosts: str | None = None
    hermes_home: str = DEFAULT_HERMES_HOME
    runtime_dir: str = DEFAULT_RUNTIME_DIR
    local: bool = False
    toolsets: str = "graph"  # the inventory's soul_toolsets: what the Hermes entry serves
    memory_provider: str = "auto"  # the inventory's soul_memory_provider
    embed: bool = False  # the inventory's soul_embed: the runtime must be able to embed
    gateway: dict | None = None  # the inventory's gateway_* vars (restart/status command, unit, label)
    # Makes the host's unopened fleet SSHConnection, as fleet-update reaches it (~/.ssh/config,
    # ProxyJump); when None, one is made from address, port, user, key and known_hosts.
    connection: Callable[[], object] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_inventory(cls, host) -> "VerifyTarget":
        """From a fleet inventory host (`fleet.inventory.Host`: name, local, vars)."""
        v = host.vars
        gateway = {k: v[k] for k in GATEWAY_VARS if v.get(k)}
        if host.local:
            return cls(host.name, local=True, hermes_home=v.get("hermes_home") or DEFAULT_HERMES_HOME,
                       runtime_dir=v.get("runtime_dir") or DEFAULT_RUNTIME_DIR,
                       toolsets=str(v.get("soul_toolsets") or "graph"),
                       memory_provider=str(v.get("soul_memory_provider") or "auto"),
                       embed=bool(v.get("soul_embed")), gateway=gateway)
        return cls(host.name, v["address"], int(v.get("port") or 22), v.get("user"),
                   str(v["key"]) if v.get("key") else None, str(v.get("known_hosts") or ""),
                   v.get("hermes_home") or DEFAULT_HERMES_HOME,
                   v.get("runtime_dir") or DEFAULT_RUNTIME_DIR,
                   toolsets=str(v.get("soul_toolsets") or "graph"),
                   memory_provider=str(v.get("soul_memory_provider") or "auto"),
                   embed=bool(v.get("soul_embed")), gateway=gateway, connection=host.connection)

    def __post_init__(self) -> None:
        if not self.local and not self.known_hosts:
            # Strict host keys need a trust source; we never fall back to "accept anything".
            raise ValueError(f"{self.name}: an SSH target needs a known_hosts file")


@dataclass(frozen=True)
class HostLayout:
    """The fixed host layout with `~` already expanded on the host."""

    runtime_dir: str
    hermes_home: str  # the home the agent runs from: the active profile's, when there is one
    toolsets: str = "graph"
    memory_provider: str = "auto"
    embed: bool = False
    gateway_unit: str = "hermes-gateway.service"
    gateway_label: str = "ai.hermes.gateway"
    profile: str | None = None

    @classmethod
    def of(cls, target: VerifyTarget, home: str, active_profile: str | None = None) -> "HostLayout":
        from fleet.hermes_names import resolve

        names = resolve(expand_home(target.hermes_home, home), home, active_profile)
        gateway = target.gateway or {}
        return cls(runtime_dir=expand_home(target.runtime_dir, home), hermes_home=names.home,
                   toolsets=target.toolsets, memory_provider=target.memory_provider, embed=target.embed,
                   gateway_unit=gateway.get("gateway_unit") or names.unit,
                   gateway_label=gateway.get("gateway_label") or names.label, profile=names.profile)

    @property
    def toolset_args(self) -> list[str]:
        """What the installer adds to the entry's args (nothing for the default)."""
        return [] if self.toolsets == "graph" else ["--toolsets", self.toolsets]

    @property
    def current(self) -> str:
        return posixpath.join(self.runtime_dir, "current")

    @property
    def releases(self) -> str:
        return posixpath.join(self.runtime_dir, "releases")

    def release(self, sha: str) -> str:
        return posixpath.join(self.releases, sha)

    def release_python(self, sha: str) -> str:
        return posixpath.join(self.release(sha), "venv", "bin", "python")

    @property
    def current_python(self) -> str:
        return posixpath.join(self.current, "venv", "bin", "python")

    @property
    def config(self) -> str:
        return posixpath.join(self.hermes_home, "config.yaml")

    @property
    def soul_file(self) -> str:
        return posixpath.join(self.hermes_home, "soul.json")

    @property
    def plugin(self) -> str:
        """The memory provider plugin's folder."""
        return posixpath.join(self.hermes_home, "plugins", "soulgraph")

    @property
    def soul_state(self) -> str:
        """What `soulrepo import` recorded: origin, commit and the skills it wrote."""
        return posixpath.join(self.hermes_home, ".soulgraph", "soul-import.json")

    @property
    def skill(self) -> str:
        return posixpath.join(self.hermes_home, "skills", "soul-graph", "SKILL.md")


def expand_home(path: str, home: str) -> str:
    if path == "~":
        return home
    if path.startswith("~/"):
        return posixpath.join(home, path[2:])
    return path
