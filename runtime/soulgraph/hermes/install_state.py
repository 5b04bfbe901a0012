"""What the installer remembers in a Hermes home, so `--remove` can undo it exactly.

`$HERMES_HOME/.soulgraph/`:
- `config.yaml.before`: config.yaml as it was before our first change, byte for byte (kept
  once, never overwritten by later installs);
- `state.json`: the SHA-256 of the config.yaml we last wrote, and what `memory.provider` was
  before we selected ours.

`--remove` restores `config.yaml.before` when config.yaml is still exactly what we wrote;
otherwise it takes our lines out and leaves the user's later edits.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from soulgraph.store.atomic import write_atomically

STATE_DIR = ".soulgraph"
BEFORE = "config.yaml.before"
STATE = "state.json"


def state_dir(home: Path) -> Path:
    return home / STATE_DIR


def read(home: Path) -> dict[str, Any]:
    try:
        data = json.loads((state_dir(home) / STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def original_config(home: Path) -> bytes | None:
    try:
        return (state_dir(home) / BEFORE).read_bytes()
    except OSError:
        return None


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def before_change(home: Path, config: Path, current: bytes) -> None:
    """Keep config.yaml as it was before our first change (with its mode: it may hold keys)."""
    folder = state_dir(home)
    if (folder / BEFORE).exists():
        return
    folder.mkdir(mode=0o700, exist_ok=True)
    write_atomically(folder / BEFORE, current, mode=config.stat().st_mode & 0o777)


def after_change(home: Path, written: bytes, **facts: Any) -> None:
    note(home, config_sha256=digest(written), **facts)


def note(home: Path, **facts: Any) -> None:
    """Record facts in state.json (the folder is made private first)."""
    state_dir(home).mkdir(mode=0o700, exist_ok=True)
    state = read(home)
    state.update(facts)
    write_atomically(state_dir(home) / STATE, (json.dumps(state, indent=2) + "\n").encode("utf-8"), mode=0o600)


def forget(home: Path) -> None:
    shutil.rmtree(state_dir(home), ignore_errors=True)
