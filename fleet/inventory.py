"""The inventory: which hosts exist, how to reach them, and their variables.

The YAML has the shape Ansible users know:

    all:
      vars: {known_hosts: ~/.ssh/known_hosts}
      children:
        workers:
          vars: {python: /usr/bin/python3}
          hosts:
            w1: {address: 10.0.0.11, user: agent}

Group vars are inherited down the `children` tree (a nearer group wins over a farther one), and a
host's own vars win over every group's. The target `local` is this machine through a local
connection; it needs no inventory at all.
"""

from __future__ import annotations

import fnmatch
import re
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from soulgraph.server.toolsets import problem as toolset_problem  # names only: no MCP SDK

# Variables every host has, with their defaults. Anything else in `vars` is passed on to the
# roles' templates as it is.
DEFAULTS: dict[str, Any] = {
    "port": 22,
    "user": None,
    "key": None,
    "known_hosts": "~/.ssh/known_hosts",
    "accept_new_host_key": False,
    "platform": None,  # linux | macos; detected from the host when not given
    "hermes_home": "~/.hermes",
    "runtime_dir": "~/.soulfleet",
    "python": "/usr/bin/python3",
    "gateway_restart_command": None,  # replaces the systemd/launchd restart
    "gateway_status_command": None,  # with a restart command of your own: exits 0 when the gateway runs
    "soul_toolsets": "graph",  # the MCP toolsets Hermes gets: graph (the 13 tools), plus memory and/or markdown
    # The Hermes memory provider: auto (installed; selected unless the host's config.yaml names
    # another provider), soulgraph (selected even then), none (not installed, provider left alone).
    "soul_memory_provider": "auto",
    # The vectors (issue 15): true installs the runtime's `embed` extra (numpy) in the release
    # venv, and search then fuses vectors into recall for questions; false: words and links only.
    "soul_embed": False,
}
MEMORY_PROVIDER_CHOICES = ("auto", "soulgraph", "none")
HOST_KEYS = set(DEFAULTS) | {"address"}
GROUP_KEYS = {"hosts", "children", "vars"}
PLATFORMS = ("linux", "macos")
LOCAL = "local"


class InventoryError(Exception):
    """A bad inventory file or target; the message names the file and the key."""


@dataclass
class Host:
    name: str
    vars: dict[str, Any] = field(default_factory=dict)
    groups: list[str] = field(default_factory=list)
    local: bool = False
    given: set[str] = field(default_factory=set)  # the vars the inventory set (the rest are defaults)

    def __getattr__(self, key: str) -> Any:
        # Convenience: host.address, host.python, ... read from vars.
        try:
            return self.__dict__["vars"][key]
        except KeyError:
            raise AttributeError(key) from None

    def connection(self):
        """A new, unopened connection to this host: the inventory's settings, and for what
        it leaves unset, the operator's ~/.ssh/config (fleet/ssh_config.py)."""
        from fleet.connections import LocalConnection
        from fleet.ssh_config import connect_settings
        if self.local:
            return LocalConnection(self.name)
        return connect_settings(self.name, self.vars, self.given)


def local_host(extra_vars: dict[str, Any] | None = None) -> Host:
    """This machine: hermes_home from $HERMES_HOME, else ~/.hermes."""
    hvars = dict(DEFAULTS, address="localhost")
    hvars["hermes_home"] = os.environ.get("HERMES_HOME") or "~/.hermes"
    hvars.update(extra_vars or {})
    return Host(LOCAL, hvars, ["local"], local=True)


@dataclass
class Inventory:
    path: Path | None
    hosts: dict[str, Host]
    groups: dict[str, list[str]]  # group name -> host names (with children's hosts)

    def select(self, target: str, limit: str | None = None) -> list[Host]:
        """Hosts for a target: `all`, a group, a host, a comma list of those, or `local`;
        then narrowed by `limit`, an fnmatch pattern (or comma list of patterns) on host or
        group names."""
        chosen: dict[str, Host] = {}
        for part in [p.strip() for p in target.split(",") if p.strip()]:
            if part == LOCAL and LOCAL not in self.hosts and LOCAL not in self.groups:
                chosen[LOCAL] = local_host()
            elif part in self.groups:
                for name in self.groups[part]:
                    chosen[name] = self.hosts[name]
            elif part in self.hosts:
                chosen[part] = self.hosts[part]
            else:
                where = f" in {self.path}" if self.path else " (no inventory given: only 'local')"
                known = ", ".join(sorted(self.groups)) or "none"
                raise InventoryError(f"no host or group named {part!r}{where}; groups: {known}")
        if not chosen:
            raise InventoryError(f"target {target!r} names no hosts")
        if limit:
            chosen = {n: h for n, h in chosen.items() if limit_allows(limit, h)}
            if not chosen:
                raise InventoryError(f"--limit {limit!r} leaves no hosts of {target!r}")
        return list(chosen.values())


def limit_allows(limit: str, host: Host) -> bool:
    """`--limit`, as Ansible reads it: patterns separated by `:` or `,` (fnmatch on host and group
    names); `!pattern` leaves those out, `&pattern` keeps only those also matching it. With only
    exclusions, everything else is allowed (`--limit '!h03'`)."""
    def matches(pattern: str) -> bool:
        return fnmatch.fnmatchcase(host.name, pattern) or any(fnmatch.fnmatchcase(g, pattern) for g in host.groups)

    parts = [p.strip() for p in re.split(r"[:,]", limit) if p.strip()]
    plain = [p for p in parts if p[0] not in "!&"]
    if plain and not any(matches(p) for p in plain):
        return False
    if any(matches(p[1:]) for p in parts if p.startswith("!")):
        return False
    return all(matches(p[1:]) for p in parts if p.startswith("&"))


def empty() -> Inventory:
    return Inventory(None, {}, {"all": []})


def load(path: str | os.PathLike[str]) -> Inventory:
    path = Path(path).expanduser()
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise InventoryError(f"{path}: no such inventory file") from None
    except yaml.YAMLError as exc:
        raise InventoryError(f"{path}: not valid YAML: {exc}") from None
    return parse(data, path)


def parse(data: Any, path: Path | None = None) -> Inventory:
    where = str(path or "<inventory>")
    if not isinstance(data, dict) or set(data) != {"all"}:
        raise InventoryError(f"{where}: the top level must be a mapping with the one key 'all'")
    hosts: dict[str, Host] = {}
    host_group_vars: dict[str, dict[str, Any]] = {}
    groups: dict[str, list[str]] = {}

    def walk(name: str, group: Any, inherited: dict[str, Any], trail: list[str],
             lineage: list[str]) -> list[str]:
        key = ".".join(trail)
        if group is None:
            group = {}
        if not isinstance(group, dict):
            raise InventoryError(f"{where}: {key} must be a mapping of hosts/children/vars")
        unknown = set(group) - GROUP_KEYS
        if unknown:
            raise InventoryError(f"{where}: {key}: unknown key {sorted(unknown)[0]!r} "
                                 f"(a group has hosts, children and vars)")
        gvars = _mapping(group.get("vars"), where, f"{key}.vars")
        _check_vars(gvars, where, f"{key}.vars")
        merged = {**inherited, **gvars}
        members: list[str] = []
        for hname, hvars in _mapping(group.get("hosts"), where, f"{key}.hosts").items():
            hkey = f"{key}.hosts.{hname}"
            hvars = _mapping(hvars, where, hkey)
            _check_vars(hvars, where, hkey)
            if hname == LOCAL:
                raise InventoryError(f"{where}: {hkey}: 'local' is reserved for this machine")
            host = hosts.setdefault(str(hname), Host(str(hname)))
            # A host listed in several groups: later groups' vars win, its own vars always win.
            host_group_vars[host.name] = {**host_group_vars.get(host.name, {}), **merged}
            host.vars.update(hvars)
            host.groups.extend(g for g in lineage if g not in host.groups)
            members.append(host.name)
        for child, body in _mapping(group.get("children"), where, f"{key}.children").items():
            members += walk(str(child), body, merged, [*trail, "children", str(child)],
                            [*lineage, str(child)])
        groups.setdefault(name, [])
        groups[name] += [m for m in members if m not in groups[name]]
        return members

    walk("all", data["all"], {}, ["all"], ["all"])
    for host in hosts.values():
        given = ansible_names({**host_group_vars.get(host.name, {}), **host.vars})
        host.given = set(given)
        host.vars = {**DEFAULTS, **given}
        host.vars.setdefault("address", host.name)
        host.groups = [g for g in host.groups if g != "all"] + ["all"]
        try:
            host.vars["port"] = int(host.vars["port"])
        except (TypeError, ValueError):
            raise InventoryError(f"{where}: host {host.name}: port must be a number, "
                                 f"not {host.vars['port']!r}") from None
        if host.vars["platform"] not in (None, *PLATFORMS):
            raise InventoryError(f"{where}: host {host.name}: platform must be one of "
                                 f"{', '.join(PLATFORMS)}, not {host.vars['platform']!r}")
    return Inventory(path, hosts, groups)


# Ansible's names for the connection vars, so an Ansible inventory works as it is.
ANSIBLE_NAMES = {"ansible_host": "address", "ansible_ssh_host": "address", "ansible_user": "user",
                 "ansible_ssh_user": "user", "ansible_port": "port", "ansible_ssh_port": "port",
                 "ansible_ssh_private_key_file": "key", "ansible_private_key_file": "key"}


def ansible_names(values: dict[str, Any]) -> dict[str, Any]:
    """`values` with Ansible's connection vars also under our names (ours win when both are set)."""
    mapped = dict(values)
    for theirs, ours in ANSIBLE_NAMES.items():
        if theirs in values and ours not in values:
            mapped[ours] = values[theirs]
    return mapped


def _mapping(value: Any, where: str, key: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InventoryError(f"{where}: {key} must be a mapping, not a {type(value).__name__}")
    return value


def _check_vars(values: dict, where: str, key: str) -> None:
    for name in values:
        if not isinstance(name, str) or not name.isidentifier():
            raise InventoryError(f"{where}: {key}: {name!r} is not a valid variable name")
    if "soul_toolsets" in values:
        wrong = toolset_problem(tuple(str(values["soul_toolsets"]).split(",")))
        if wrong:
            raise InventoryError(f"{where}: {key}: soul_toolsets {values['soul_toolsets']!r} must be graph, "
                                 f"optionally with more (e.g. graph,memory,markdown): {wrong}")
    if "soul_embed" in values and not isinstance(values["soul_embed"], bool):
        raise InventoryError(f"{where}: {key}: soul_embed {values['soul_embed']!r} must be true or false")
    if "soul_memory_provider" in values and values["soul_memory_provider"] not in MEMORY_PROVIDER_CHOICES:
        raise InventoryError(f"{where}: {key}: soul_memory_provider {values['soul_memory_provider']!r} must be one "
                             f"of {', '.join(MEMORY_PROVIDER_CHOICES)}")
