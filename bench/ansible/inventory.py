"""Ansible's inventory for the hosts of a soulfleet inventory (the lab's `write_inventory` shape).

soulfleet: all.children.<group>.hosts.<name>.{address, port, user, key, hermes_home?,
runtime_dir?} and all.vars.known_hosts. Ansible: the same tree with ansible_host, ansible_port,
ansible_user, ansible_ssh_private_key_file, and the known_hosts file passed to ssh.

    python bench/ansible/inventory.py soulfleet.yml > ansible-inventory.yml
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import yaml

CONNECTION_KEYS = {"address": "ansible_host", "port": "ansible_port", "user": "ansible_user",
                   "key": "ansible_ssh_private_key_file"}
LAYOUT_KEYS = ("hermes_home", "runtime_dir")


def ansible_host_vars(host: dict) -> dict:
    out = {CONNECTION_KEYS[k]: v for k, v in host.items() if k in CONNECTION_KEYS}
    out.update({k: host[k] for k in LAYOUT_KEYS if k in host})
    return out


def to_ansible(soulfleet: dict) -> dict:
    everything = soulfleet.get("all", {})
    children = {}
    for group, body in (everything.get("children") or {}).items():
        hosts = (body or {}).get("hosts") or {}
        children[group] = {"hosts": {name: ansible_host_vars(h or {}) for name, h in hosts.items()}}
    common = dict(everything.get("vars") or {})
    known_hosts = common.pop("known_hosts", None)
    ansible_vars = {k: v for k, v in common.items() if k in LAYOUT_KEYS}
    if known_hosts:
        # Only this file is trusted, as with soulfleet (no ~/.ssh/known_hosts, no hashing games).
        ansible_vars["ansible_ssh_common_args"] = (
            f"-o UserKnownHostsFile={shlex.quote(str(known_hosts))} -o GlobalKnownHostsFile=/dev/null")
    return {"all": {"children": children, "vars": ansible_vars}}


def write_ansible_inventory(soulfleet_inventory: Path, dest: Path) -> Path:
    data = yaml.safe_load(Path(soulfleet_inventory).read_text())
    dest.write_text(yaml.safe_dump(to_ansible(data), sort_keys=False))
    return dest


if __name__ == "__main__":
    sys.stdout.write(yaml.safe_dump(to_ansible(yaml.safe_load(Path(sys.argv[1]).read_text())),
                                    sort_keys=False))
