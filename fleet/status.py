"""`fleet status`: what a host runs now (deployed sha, Hermes entry, gateway state, the layered
soul commit imported). Read-only."""

from __future__ import annotations

import json
import time
from typing import Any

import yaml

from fleet.connections import HostConnectionError
from fleet.facts import expand_home, gather, sh_path
from fleet.inventory import Host
from fleet import hermes_names
from fleet.operations.service import status_command

MARK = "::soulfleet-status::"
SOUL_MARK = "::soulfleet-soul::"
SOUL_STATE = ".soulgraph/soul-import.json"  # written by `soulrepo import` (soulgraph/soulrepo/importer.py)


def host_status(host: Host) -> dict[str, Any]:
    started = time.monotonic()
    report: dict[str, Any] = {"host": host.name}
    conn = host.connection()
    try:
        facts = gather(conn, host.vars)
        names = hermes_names.resolve(expand_home(str(host.vars["hermes_home"]), facts["home"]), facts["home"],
                                     facts.get("active_profile"))
        hermes_home = names.home  # the home the agent runs from (its active profile's)
        gateway = status_command(host.vars, facts["platform"], facts["uid"],
                                         host.vars.get("gateway_unit") or names.unit,
                                         host.vars.get("gateway_label") or names.label)
        probe = f"{{ {gateway}; }} >/dev/null 2>&1 && echo active || echo inactive" if gateway else \
            "echo 'unknown (gateway_restart_command is set: give gateway_status_command to check it)'"
        out = conn.run(f"cat {sh_path(hermes_home)}/config.yaml 2>/dev/null; echo '{MARK}'; "
                       f"{probe}; "
                       f"echo '{SOUL_MARK}'; cat {sh_path(hermes_home)}/{SOUL_STATE} 2>/dev/null",
                       timeout=60).stdout
        config_text, _, rest = out.partition(MARK + "\n")
        gateway, _, soul_text = rest.partition(SOUL_MARK + "\n")
        entry = None
        try:
            servers = (yaml.safe_load(config_text) or {}).get("mcp_servers") or {}
            entry = servers.get("soul")
        except (yaml.YAMLError, AttributeError):
            entry = "unreadable config.yaml"
        report.update(reachable=True, platform=facts["platform"], sha=facts["deployed_sha"],
                      hermes_home=hermes_home, hermes_profile=names.profile, hermes_config=facts["config_exists"],
                      hermes_entry=(entry.get("command") if isinstance(entry, dict) else entry),
                      gateway=gateway.strip(), **_soul(soul_text))
    except HostConnectionError as exc:
        report.update(reachable=False, error=str(exc))
    finally:
        conn.close()
    report["seconds"] = round(time.monotonic() - started, 2)
    return report


def _soul(text: str) -> dict[str, Any]:
    if not text.strip():
        return {"soul": None, "soul_origin": None}
    try:
        state = json.loads(text)
        return {"soul": state["commit"], "soul_origin": state.get("origin")}
    except (ValueError, KeyError, TypeError):
        return {"soul": "unreadable soul-import.json", "soul_origin": None}
