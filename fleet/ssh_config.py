"""How to reach a host over SSH: the inventory's settings, then the operator's ~/.ssh/config.

What a real fleet's operator has: hosts named by an alias in `~/.ssh/config` with `HostName`,
`User`, `Port`, `IdentityFile`, and `ProxyJump` through a bastion. Read with paramiko's own
SSHConfig parser; only what the inventory leaves unset is taken from it (the inventory wins,
as in Ansible). A ProxyJump host (`[user@]host[:port]`, comma-separated for a chain, each
looked up in the config too) is connected to first, with the same known_hosts and host-key
policy, and the host is reached through a `direct-tcpip` channel of that connection.
`$SOULFLEET_SSH_CONFIG` names another config file (tests use it).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import paramiko

from fleet.connections import SSHConnection

DEFAULT_CONFIG = "~/.ssh/config"


def _config() -> paramiko.SSHConfig | None:
    path = Path(os.environ.get("SOULFLEET_SSH_CONFIG") or DEFAULT_CONFIG).expanduser()
    if not path.is_file():
        return None
    return paramiko.SSHConfig.from_path(str(path))


def connect_settings(name: str, hvars: dict[str, Any], given: set[str]) -> SSHConnection:
    config = _config()
    alias = str(hvars["address"])
    found = config.lookup(alias) if config else {}
    address = alias if "address" in given or "hostname" not in found else found["hostname"]
    user = hvars["user"] if "user" in given or not found.get("user") else found["user"]
    port = int(hvars["port"]) if "port" in given or not found.get("port") else int(found["port"])
    key = hvars["key"]
    if "key" not in given and found.get("identityfile"):
        key = found["identityfile"][0]
    jump = found.get("proxyjump") if "proxy_jump" not in given else hvars.get("proxy_jump")
    return SSHConnection(name, address, port=port, user=user, key=key, known_hosts=hvars["known_hosts"],
                         accept_new=bool(hvars["accept_new_host_key"]),
                         proxy=_jump(jump, config, hvars) if jump and str(jump).lower() != "none" else None)


def _jump(spec: str, config: paramiko.SSHConfig | None, hvars: dict[str, Any]) -> SSHConnection:
    """The first hop of `spec`, itself reached through the rest of the chain in front of it."""
    hops = [hop.strip() for hop in str(spec).split(",") if hop.strip()]
    proxy = None
    for hop in hops:
        match = re.fullmatch(r"(?:(?P<user>[^@]+)@)?(?P<host>\[[^\]]+\]|[^:]+)(?::(?P<port>\d+))?", hop)
        if not match:
            raise ValueError(f"ProxyJump {hop!r} is not [user@]host[:port]")
        alias = match["host"].strip("[]")
        found = config.lookup(alias) if config else {}
        key = found["identityfile"][0] if found.get("identityfile") else None
        proxy = SSHConnection(f"{alias} (jump)", found.get("hostname", alias),
                              port=int(match["port"] or found.get("port") or 22),
                              user=match["user"] or found.get("user"), key=key,
                              known_hosts=hvars["known_hosts"], accept_new=bool(hvars["accept_new_host_key"]),
                              proxy=proxy)
    return proxy
