"""`python -m soulgraph.install --remove`: take the soul graph out of a Hermes home again.

- config.yaml: when it is still exactly what the installer last wrote, the copy kept before
  the first install (`hermes/install_state.py`) comes back byte for byte. When the user has
  edited it since, only our lines go (the `mcp_servers.soul` entry; `memory.provider` back to
  what it was), their edits stay, and the report says so. A backup is taken first either way.
- The skill and the provider plugin folder go when they are ours (marked), never otherwise.
- soul.json and its journal stay: they are the agent's memories, not our configuration.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from soulgraph.hermes import install_state, plugin_files
from soulgraph.hermes.config import ConfigError, plan_remove_entry
from soulgraph.hermes.home import HermesHomeError, resolve_home
from soulgraph.hermes.provider_config import plan_restore
from soulgraph.hermes.skill import SKILL_RELPATH, is_ours
from soulgraph.store.atomic import write_atomically

SERVER_NAME = "soul"


def uninstall(hermes_home: str | os.PathLike[str] | None = None, *, check: bool = False) -> dict[str, Any]:
    report: dict[str, Any] = {"removed": True, "check": check, "status": "unchanged", "hermes_home": None,
                              "config": "unchanged", "backup": None, "skill": "absent", "plugin": "absent",
                              "soul_file": "kept", "warnings": [], "errors": []}
    try:
        home = resolve_home(hermes_home).path
    except HermesHomeError as exc:
        report.update(status="error", errors=[str(exc)])
        return report
    report["hermes_home"] = str(home)
    config = home / "config.yaml"
    if config.is_file():
        _config(report, home, config.resolve(), check)
    _skill(report, home, check)
    folder = plugin_files.plugin_dir(home)
    if folder.exists():
        report["plugin"] = plugin_files.SOMEONE_ELSES if not plugin_files.is_ours(folder) else "removed"
        if report["plugin"] == "removed" and not check:
            plugin_files.remove(home)
            if install_state.read(home).get("created_plugins_dir"):
                try:
                    folder.parent.rmdir()  # plugins/, made by the install, when nothing else is in it
                except OSError:
                    pass
    if not check and not report["errors"]:
        install_state.forget(home)
    if report["errors"]:
        report["status"] = "error"
    elif report["config"] != "unchanged" or "removed" in (report["skill"], report["plugin"]):
        report["status"] = "changed"
    return report


def _config(report: dict[str, Any], home: Path, config: Path, check: bool) -> None:
    current = config.read_bytes()
    state = install_state.read(home)
    original = install_state.original_config(home)
    if original is not None and state.get("config_sha256") == install_state.digest(current):
        new = original
        report["config"] = "restored" if new != current else "unchanged"
    else:
        try:
            text = current.decode("utf-8")
            edit = plan_remove_entry(text, SERVER_NAME, label=str(config))
            restore = plan_restore(edit.new_text, state.get("provider_before"), label=str(config))
        except (UnicodeDecodeError, ConfigError) as exc:
            report["errors"].append(f"{config}: {exc}; left untouched")
            report["config"] = "error"
            return
        new = restore.new_text.encode("utf-8")
        report["warnings"] += edit.warnings + restore.warnings
        if new != current:
            report["config"] = "edited"
            if original is not None:
                report["warnings"].append(f"{config} was changed after the install: our lines were taken out "
                                          "and the other changes kept, so it is not byte for byte the original")
    if new == current or check:
        return
    if report["config"] == "restored":  # what we wrote ourselves: nothing of the user's to keep
        write_atomically(config, new)
        return
    stamp = 1
    backup = config.with_name(f"{config.name}.bak-soulgraph-remove")
    while backup.exists():
        stamp += 1
        backup = config.with_name(f"{config.name}.bak-soulgraph-remove-{stamp}")
    shutil.copy2(config, backup)
    report["backup"] = str(backup)
    write_atomically(config, new)


def _skill(report: dict[str, Any], home: Path, check: bool) -> None:
    path = home / SKILL_RELPATH
    if not path.exists():
        return
    try:
        ours = is_ours(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        ours = False
    if not ours:
        report["skill"] = "hand-written, left alone"
        return
    report["skill"] = "removed"
    if not check:
        path.unlink()
        try:
            path.parent.rmdir()  # skills/soul-graph/, when nothing else is in it
        except OSError:
            pass
