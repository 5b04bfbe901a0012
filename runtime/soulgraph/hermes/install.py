"""Install the soul graph into a Hermes home: `python -m soulgraph.install`.

Three idempotent changes, reported as one JSON object on stdout:

1. MCP server: `mcp_servers.soul` in config.yaml runs `python -m soulgraph.mcp` with this
   runtime's own Python and an explicit `--soul-file <home>/soul.json` (Hermes passes a
   stdio server no HERMES_HOME). Only our entry's lines change; config.yaml is backed up
   first and replaced atomically with its mode kept.
2. Seed: when soul.json does not exist, it is built from SOUL.md and the memories.
   An existing soul.json is never touched; an unreadable one is reported.
3. Skill: skills/soul-graph/SKILL.md, only next to the MCP entry; a hand-written skill
   of that name is left alone.

A home without config.yaml is skipped. Exit status: 0 when everything is in place
(changed or not, or skipped), 1 on any error. `--check` changes nothing and reports
what would change, with the config.yaml diff (also printed to stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from soulgraph.store.atomic import write_atomically
from soulgraph.hermes.config import ConfigError, plan_entry
from soulgraph.hermes.home import HermesHomeError, resolve_home
from soulgraph.hermes.seed import seed_graph
from soulgraph.hermes.skill import SKILL_NAME, SKILL_RELPATH, frontmatter, is_ours, skill_name, skill_text
from soulgraph.server.toolsets import DEFAULT_TOOLSETS, parse_toolsets
from soulgraph.store import SoulFile, SoulFileError

SERVER_NAME = "soul"
SOUL_FILE = "soul.json"
# Our calls answer in milliseconds; a minute is for a host under heavy load.
TOOL_TIMEOUT = 60
CONNECT_TIMEOUT = 30

SKILL_LEFT_ALONE = "hand-written, left alone"
SEED_CORRUPT = "corrupt, left alone"


def server_python(python: str | None = None) -> str:
    # Not resolved: a venv's python is a symlink, and resolving it would leave the venv
    # (and a `current` symlink switched on upgrade would stop being followed).
    return os.path.abspath(python or sys.executable)


def new_report(home: Path | None, profile: str | None, check: bool) -> dict[str, Any]:
    base = home or Path()
    return {
        "hermes_home": str(home) if home else None,
        "profile": profile,
        "check": check,
        "status": "unchanged",  # changed | unchanged | skipped | error
        "config": str(base / "config.yaml") if home else None,
        "mcp_server": "skipped",  # added | updated | unchanged | skipped | error
        "backup": None,
        "config_diff": "",
        "seed": "skipped",  # created | exists | corrupt, left alone | skipped | error
        "seed_nodes": None,
        "soul_file": str(base / SOUL_FILE) if home else None,
        "skill": "skipped",  # installed | updated | unchanged | hand-written, left alone | skipped | error
        "skill_file": str(base / SKILL_RELPATH) if home else None,
        "warnings": [],
        "errors": [],
    }


def install(hermes_home: str | os.PathLike[str] | None = None, *, check: bool = False,
            python: str | None = None, toolsets: tuple[str, ...] = DEFAULT_TOOLSETS) -> dict[str, Any]:
    try:
        resolved = resolve_home(hermes_home)
    except HermesHomeError as exc:
        report = new_report(None, None, check)
        report.update(status="error", mcp_server="error", errors=[str(exc)])
        return report
    home = resolved.path
    report = new_report(home, resolved.profile, check)
    if resolved.profile and resolved.root != home:
        report["warnings"].append(f"{resolved.root}/active_profile selects profile {resolved.profile!r}: installing into {home}")
    config = home / "config.yaml"
    if not config.is_file():
        report["status"] = "skipped"
        report["warnings"].append(f"no Hermes config.yaml in {home}: not a Hermes home in use, skipped")
        return report

    _install_mcp_entry(report, config, home / SOUL_FILE, python, check, toolsets)
    if report["mcp_server"] != "error":
        _install_seed(report, home, check)
        _install_skill(report, home, check)
    if report["errors"]:
        report["status"] = "error"
    elif any(report[k] in ("added", "updated", "created", "installed") for k in ("mcp_server", "seed", "skill")):
        report["status"] = "changed"
    return report


# ------------------------------------------------------------------ 1. the MCP entry
def _install_mcp_entry(report: dict[str, Any], config: Path, soul_file: Path,
                       python: str | None, check: bool, toolsets: tuple[str, ...] = DEFAULT_TOOLSETS) -> None:
    # The default toolset is not spelled out, so entries written before toolsets existed stay as they are.
    chosen = [] if tuple(toolsets) == DEFAULT_TOOLSETS else ["--toolsets", ",".join(toolsets)]
    managed = {
        "command": server_python(python),
        "args": ["-m", "soulgraph.mcp", "--soul-file", str(soul_file), *chosen],
        # Without these Hermes adds four resource/prompt helper tools we do not serve.
        "tools": {"resources": False, "prompts": False},
    }
    defaults = {"enabled": True, "timeout": TOOL_TIMEOUT, "connect_timeout": CONNECT_TIMEOUT}
    target = config.resolve()  # a symlinked config.yaml (dotfiles) is edited where it lives
    try:
        raw = target.read_bytes()
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return _fail(report, "mcp_server", f"{config} is not UTF-8 text; left untouched")
    except OSError as exc:
        return _fail(report, "mcp_server", f"{config} cannot be read ({exc.strerror}); left untouched")
    try:
        edit = plan_entry(text, SERVER_NAME, managed, defaults, label=str(config))
    except ConfigError as exc:
        return _fail(report, "mcp_server", str(exc))
    report["mcp_server"] = edit.status
    report["warnings"] += edit.warnings
    if edit.status == "unchanged":
        return
    report["config_diff"] = edit.diff(str(config))
    if check:
        return
    try:
        report["backup"] = str(_backup(target))
        write_atomically(target, edit.new_text.encode("utf-8"))
    except OSError as exc:
        _fail(report, "mcp_server", f"{config} could not be written ({exc}); left as it was")


def _backup(path: Path) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    backup = path.with_name(f"{path.name}.bak-soulgraph-{stamp}")
    n = 1
    while backup.exists():
        n += 1
        backup = path.with_name(f"{path.name}.bak-soulgraph-{stamp}-{n}")
    shutil.copy2(path, backup)  # keeps the mode: the copy is as private as the original
    return backup


# ------------------------------------------------------------------ 2. the seed
def _install_seed(report: dict[str, Any], home: Path, check: bool) -> None:
    soul_path = home / SOUL_FILE
    if soul_path.exists() or soul_path.is_symlink():
        try:
            report["seed_nodes"] = len(SoulFile(soul_path).graph())
            report["seed"] = "exists"
        except SoulFileError as exc:
            report["seed"] = SEED_CORRUPT
            report["errors"].append(f"{exc} (the soul MCP server will refuse to start until it is fixed or moved away)")
        return
    graph, warnings = seed_graph(home)
    report["warnings"] += [f"seed: {w}" for w in warnings]
    report["seed_nodes"] = len(graph)
    report["seed"] = "created"
    if check:
        return
    try:
        SoulFile(soul_path).save(graph)
    except (SoulFileError, OSError) as exc:
        _fail(report, "seed", f"{soul_path} could not be written ({exc})")


# ------------------------------------------------------------------ 3. the skill
def _install_skill(report: dict[str, Any], home: Path, check: bool) -> None:
    path = home / SKILL_RELPATH
    wanted = skill_text(SERVER_NAME)
    other = _same_name_elsewhere(home, path)
    if other is not None:
        report["skill"] = SKILL_LEFT_ALONE
        report["warnings"].append(f"{other} is a hand-written skill named {SKILL_NAME!r}; ours was not installed")
        return
    try:
        current = path.read_text(encoding="utf-8") if path.exists() else None
    except (OSError, UnicodeDecodeError) as exc:
        report["skill"] = SKILL_LEFT_ALONE
        report["warnings"].append(f"{path} cannot be read ({exc}); left alone")
        return
    if current is not None and not is_ours(current):
        report["skill"] = SKILL_LEFT_ALONE
        report["warnings"].append(f"{path} has no \"generated_by: soulgraph.install\" marker, so it is someone else's; left alone")
        return
    if current == wanted:
        report["skill"] = "unchanged"
        return
    report["skill"] = "installed" if current is None else "updated"
    if check:
        return
    try:
        write_atomically(path, wanted.encode("utf-8"))
    except OSError as exc:
        _fail(report, "skill", f"{path} could not be written ({exc})")


def _same_name_elsewhere(home: Path, ours: Path) -> Path | None:
    """A skill with our name in another folder would clash with ours in Hermes' list."""
    skills = home / "skills"
    if not skills.is_dir():
        return None
    for found in skills.rglob("SKILL.md"):
        if found == ours or any(part.startswith(".") for part in found.relative_to(skills).parts):
            continue  # Hermes skips hidden folders (.hub, .archive, .git)
        try:
            head = found.read_text(encoding="utf-8", errors="replace")[:4096]
        except OSError:
            continue
        if frontmatter(head) and skill_name(head) == SKILL_NAME and not is_ours(head):
            return found
    return None


def _fail(report: dict[str, Any], step: str, message: str) -> None:
    report[step] = "error"
    report["errors"].append(message)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m soulgraph.install",
        description="Install the soul graph into a Hermes home: MCP entry, seeded soul.json, skill.",
    )
    parser.add_argument("--hermes-home", help="the Hermes home (default: $HERMES_HOME, else ~/.hermes); "
                        "an active_profile file there redirects to that profile")
    parser.add_argument("--check", action="store_true", help="change nothing; report what would change, with a diff")
    parser.add_argument("--python", help="the Python that runs the MCP server (default: this one, %(default)s)",
                        default=None)
    parser.add_argument("--toolsets", type=parse_toolsets, default=DEFAULT_TOOLSETS,
                        help="the toolsets the Hermes entry serves, e.g. graph,memory (default: graph, the 13 tools)")
    args = parser.parse_args(argv)
    report = install(args.hermes_home, check=args.check, python=args.python, toolsets=args.toolsets)
    print(json.dumps(report, indent=2, ensure_ascii=False))
    if args.check and report["config_diff"]:
        print(report["config_diff"], file=sys.stderr, end="")
    return 1 if report["status"] == "error" else 0


if __name__ == "__main__":
    sys.exit(main())
