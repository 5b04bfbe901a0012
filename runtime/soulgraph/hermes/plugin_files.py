"""The provider plugin's files in a Hermes home: $HERMES_HOME/plugins/soulgraph/.

Three files: the shim (`hermes/plugin/__init__.py`, standard library only), its `plugin.yaml`,
and `settings.json`, which names the Python of this release venv and the soul file, and marks
the folder as ours (`generated_by`). A folder of that name without the mark is someone
else's plugin and is left alone.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from soulgraph.store.atomic import write_atomically

PLUGIN_NAME = "soulgraph"
MARK = "soulgraph.install"
SOURCE = Path(__file__).with_name("plugin")
FILES = ("__init__.py", "plugin.yaml")


def plugin_dir(home: Path) -> Path:
    return home / "plugins" / PLUGIN_NAME


def wanted(python: str, soul_file: Path) -> dict[str, bytes]:
    settings = {"generated_by": MARK, "python": python, "soul_file": str(soul_file)}
    files = {name: (SOURCE / name).read_bytes() for name in FILES}
    files["settings.json"] = (json.dumps(settings, indent=2) + "\n").encode("utf-8")
    return files


def is_ours(folder: Path) -> bool:
    try:
        return json.loads((folder / "settings.json").read_text(encoding="utf-8")).get("generated_by") == MARK
    except (OSError, ValueError, AttributeError):
        return False


@dataclass
class PluginPlan:
    status: str  # installed | updated | unchanged | someone else's, left alone
    folder: Path
    files: dict[str, bytes]


SOMEONE_ELSES = "someone else's, left alone"


def plan(home: Path, python: str, soul_file: Path) -> PluginPlan:
    folder = plugin_dir(home)
    files = wanted(python, soul_file)
    if not folder.exists():
        return PluginPlan("installed", folder, files)
    if not is_ours(folder):
        return PluginPlan(SOMEONE_ELSES, folder, files)
    same = all((folder / name).is_file() and (folder / name).read_bytes() == data for name, data in files.items())
    return PluginPlan("unchanged" if same else "updated", folder, files)


def write(plan_: PluginPlan) -> None:
    """Write the files (each atomically; settings.json last, so a folder is ours only once whole)."""
    plan_.folder.mkdir(parents=True, exist_ok=True)
    for name in sorted(plan_.files, key=lambda n: n == "settings.json"):
        write_atomically(plan_.folder / name, plan_.files[name])


def remove(home: Path) -> str:
    """Delete our plugin folder: removed | absent | someone else's, left alone."""
    folder = plugin_dir(home)
    if not folder.exists():
        return "absent"
    if not is_ours(folder):
        return SOMEONE_ELSES
    shutil.rmtree(folder)
    return "removed"
