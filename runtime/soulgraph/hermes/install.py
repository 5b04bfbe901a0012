"""Install the soul graph into a Hermes home: `python -m soulgraph.install`.

Idempotent changes, reported as one JSON object on stdout:

1. MCP server: `mcp_servers.soul` in config.yaml runs `python -m soulgraph.mcp` with this
   runtime's own Python and an explicit `--soul-file <home>/soul.json` (Hermes passes a
   stdio server no HERMES_HOME). Only our entry's lines change.
2. Memory provider: the plugin folder plugins/soulgraph/ (hermes/plugin_files.py) and
   `memory.provider: soulgraph` in config.yaml, unless it names another provider: the user's
   choice stays unless `--memory-provider soulgraph` (`none` leaves both alone).
   config.yaml is written once for 1 and 2, after a backup, atomically, its mode kept; the
   copy from before our first change is kept in .soulgraph/ (hermes/install_state.py).
3. Seed: when soul.json does not exist, it is built from SOUL.md and the memories. Only
   SOUL.md entries the scanner passes become pinned axioms; those that read like prompt
   injection are stored flagged (private, unpinned) and listed in `seed_flagged`.
   An existing soul.json is never touched; an unreadable one is reported.
4. Skill: skills/soul-graph/SKILL.md, only next to the MCP entry; a hand-written skill
   of that name is left alone.

`--remove` undoes 1, 2 and 4 (hermes/uninstall.py); soul.json stays. A home without
config.yaml is skipped. Exit status: 0 when everything is in place (changed or not, or
skipped), 1 on any error. `--check` changes nothing and reports what would change, with the
config.yaml diff (also printed to stderr).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from soulgraph.store.atomic import write_atomically
from soulgraph.hermes import install_record, install_state, plugin_files
from soulgraph.hermes.config import SERVERS_KEY, ConfigError, load as load_config, plan_entry
from soulgraph.memory import scopes
from soulgraph.hermes.provider_config import plan_provider
from soulgraph.hermes.home import HermesHomeError, resolve_home
from soulgraph.hermes.uninstall import uninstall
from soulgraph.hermes.skill import SKILL_NAME, SKILL_RELPATH, frontmatter, is_ours, skill_name, skill_text
from soulgraph.server.toolsets import DEFAULT_TOOLSETS, parse_toolsets
from soulgraph.store import SCHEMA, SoulFile, SoulFileError

SERVER_NAME = "soul"
SOUL_FILE = "soul.json"
MEMORY_PROVIDER_CHOICES = ("auto", "soulgraph", "none")
NOT_SELECTED = "not installed: another provider is chosen"

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
        "scopes": None,  # an existing soul: shared and user memories, and the schema migration the next write makes
        "seed_skipped": [],  # Hermes' backups of memory files, not seeded (--seed-backups reads them)
        # Seeded entries the scanner flagged as prompt injection: stored private, never pinned,
        # withheld from prompts ({"id", "sources", "rules", "pin_dropped"} each).
        "seed_flagged": [],
        "soul_file": str(base / SOUL_FILE) if home else None,
        "skill": "skipped",  # installed | updated | unchanged | hand-written, left alone | skipped | error
        "skill_file": str(base / SKILL_RELPATH) if home else None,
        "plugin": "skipped",  # installed | updated | unchanged | someone else's, left alone | not installed: … | skipped | error
        "plugin_dir": str(plugin_files.plugin_dir(base)) if home else None,
        "memory_provider": "skipped",  # selected | unchanged | taken | replaced | skipped | error
        "memory_provider_before": None,
        "warnings": [],
        "errors": [],
    }


def install(hermes_home: str | os.PathLike[str] | None = None, *, check: bool = False,
            python: str | None = None, toolsets: tuple[str, ...] = DEFAULT_TOOLSETS,
            memory_provider: str = "auto", seed_backups: bool = False, mcp_scope: str | None = None) -> dict[str, Any]:
    """`memory_provider`: auto (install the plugin; select it when no other provider is
    chosen), soulgraph (select it even over another), none (leave plugins and provider alone).
    `mcp_scope`: the scope the MCP server serves (memory/scopes.py; "" shared); None keeps the
    one the entry has (a `--scope` an operator set survives every later install)."""
    if memory_provider not in MEMORY_PROVIDER_CHOICES:
        raise ValueError(f"memory_provider must be one of {', '.join(MEMORY_PROVIDER_CHOICES)}, got {memory_provider!r}")
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

    plugin = plugin_files.plan(home, server_python(python), home / SOUL_FILE) if memory_provider != "none" else None
    _install_config(report, home, config, home / SOUL_FILE, python, check, toolsets, memory_provider, plugin,
                    mcp_scope)
    if report["mcp_server"] != "error":
        _install_seed(report, home, check, seed_backups)
        _install_skill(report, home, check)
    if report["errors"]:
        report["status"] = "error"
    elif any(report[k] in ("added", "updated", "created", "installed", "selected", "replaced")
             for k in ("mcp_server", "seed", "skill", "plugin", "memory_provider")):
        report["status"] = "changed"
    return report


# ------------------------------------------------------------------ 1. config.yaml: MCP entry and provider
def _install_config(report: dict[str, Any], home: Path, config: Path, soul_file: Path, python: str | None,
                    check: bool, toolsets: tuple[str, ...], memory_provider: str,
                    plugin: plugin_files.PluginPlan | None, mcp_scope: str | None = None) -> None:
    """Both config.yaml edits, planned on the text in turn; then the plugin's files, then
    config.yaml written once. Nothing is written when either edit cannot be made."""
    target = config.resolve()  # a symlinked config.yaml (dotfiles) is edited where it lives
    try:
        text = target.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return _fail(report, "mcp_server", f"{config} is not UTF-8 text; left untouched")
    except OSError as exc:
        return _fail(report, "mcp_server", f"{config} cannot be read ({exc.strerror}); left untouched")
    try:
        scope = entry_scope(text, str(config)) if mcp_scope is None else mcp_scope
        edit = plan_entry(text, SERVER_NAME, mcp_entry(soul_file, python, toolsets, scope), ENTRY_DEFAULTS,
                          label=str(config))
    except ConfigError as exc:
        return _fail(report, "mcp_server", str(exc))
    report["mcp_server"] = edit.status
    report["warnings"] += edit.warnings
    new_text = edit.new_text
    provider_before: Any = _MISSING
    if plugin is not None:
        report["plugin"] = plugin.status
        if plugin.status == plugin_files.SOMEONE_ELSES:
            report["warnings"].append(f"{plugin.folder} is not ours (no settings.json from soulgraph.install); "
                                      "left alone, and the provider not selected")
    if plugin is not None and plugin.status != plugin_files.SOMEONE_ELSES:
        try:
            chosen = plan_provider(new_text, take_over=memory_provider == "soulgraph", label=str(config))
        except ConfigError as exc:
            _fail(report, "memory_provider", str(exc))
        else:
            report["memory_provider"], report["memory_provider_before"] = chosen.status, chosen.before
            report["warnings"] += chosen.warnings
            new_text = chosen.new_text
            if chosen.status in ("selected", "replaced"):
                provider_before = chosen.before
    # Another provider chosen: nothing of ours goes into plugins/ either (the user asked for
    # theirs). A memory section we cannot edit costs the provider, not the MCP entry.
    if report["memory_provider"] == "taken" and plugin is not None and plugin.status == "installed":
        report["plugin"] = NOT_SELECTED
    if plugin is not None and report["plugin"] in ("installed", "updated") and not check \
            and report["memory_provider"] != "error":
        try:
            if not plugin.folder.parent.exists():
                install_state.note(home, created_plugins_dir=True)  # so --remove takes it away again
            plugin_files.write(plugin)
        except OSError as exc:
            return _fail(report, "plugin", f"{plugin.folder} could not be written ({exc}); config.yaml left as it was")
    if new_text == text:
        return
    report["config_diff"] = "".join(difflib.unified_diff(
        text.splitlines(keepends=True), new_text.splitlines(keepends=True),
        fromfile=str(config), tofile=f"{config} (after install)"))
    if check:
        return
    try:
        report["backup"] = str(_backup(target))
        install_state.before_change(home, target, text.encode("utf-8"))
        write_atomically(target, new_text.encode("utf-8"))
        install_state.after_change(home, new_text.encode("utf-8"),
                                   **({} if provider_before is _MISSING else {"provider_before": provider_before}))
    except OSError as exc:
        _fail(report, "mcp_server", f"{config} could not be written ({exc}); left as it was")


_MISSING = object()
# Our calls answer in milliseconds; a minute is for a host under heavy load.
ENTRY_DEFAULTS = {"enabled": True, "timeout": 60, "connect_timeout": 30}


def mcp_entry(soul_file: Path, python: str | None, toolsets: tuple[str, ...] = DEFAULT_TOOLSETS,
              scope: str = "") -> dict[str, Any]:
    # The default toolset is not spelled out, so entries written before toolsets existed stay as they are.
    chosen = [] if tuple(toolsets) == DEFAULT_TOOLSETS else ["--toolsets", ",".join(toolsets)]
    served = ["--scope", scope] if scope else []  # shared, the default, is not spelled out either
    return {
        "command": server_python(python),
        # --structured-only: Hermes hands the model both the text and the structured copy of a
        # result; with only the structured one, the model reads each result once (server/answers.py).
        "args": ["-m", "soulgraph.mcp", "--soul-file", str(soul_file), *chosen, *served, "--structured-only"],
        # Without these Hermes adds four resource/prompt helper tools we do not serve.
        "tools": {"resources": False, "prompts": False},
    }


def entry_scope(text: str, label: str) -> str:
    """The `--scope` our entry in config.yaml already passes ("" when none): an operator's
    choice that a re-install must not drop."""
    doc = load_config(text, label)
    servers = doc.get(SERVERS_KEY) if isinstance(doc, dict) else None
    entry = servers.get(SERVER_NAME) if isinstance(servers, dict) else None  # a bad shape: plan_entry says so
    args = entry.get("args") if isinstance(entry, dict) else None
    if not isinstance(args, list) or "--scope" not in args:
        return ""
    at = args.index("--scope") + 1
    try:
        return scopes.parse(str(args[at])) if at < len(args) else ""
    except scopes.ScopeError as exc:
        raise ConfigError(f"{label}: {SERVERS_KEY}.{SERVER_NAME} passes --scope {args[at]!r}: {exc}; left untouched") from None


def _backup(path: Path) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    backup = path.with_name(f"{path.name}.bak-soulgraph-{stamp}")
    n = 1
    while backup.exists():
        n += 1
        backup = path.with_name(f"{path.name}.bak-soulgraph-{stamp}-{n}")
    shutil.copy2(path, backup)  # keeps the mode: the copy is as private as the original
    _prune_backups(path)
    return backup


KEEP_BACKUPS = 5  # our config.yaml backups kept (one per changing install; .soulgraph/ keeps the first)


def _prune_backups(path: Path) -> None:
    """Only the newest KEEP_BACKUPS of our own backups stay (a deploy per week made one each)."""
    ours = sorted(path.parent.glob(f"{path.name}.bak-soulgraph-*"), key=lambda p: (p.stat().st_mtime, p.name))
    for old in ours[:-KEEP_BACKUPS]:
        old.unlink(missing_ok=True)


# ------------------------------------------------------------------ 2. the seed
def _install_seed(report: dict[str, Any], home: Path, check: bool, include_backups: bool = False) -> None:
    soul_path = home / SOUL_FILE
    if soul_path.exists() or soul_path.is_symlink():
        try:
            existing = SoulFile(soul_path)
            graph = existing.graph()
            report["seed_nodes"] = len(graph)
            report["seed"] = "exists"
            report["scopes"] = _scopes_report(existing, graph)
        except SoulFileError as exc:
            report["seed"] = SEED_CORRUPT
            report["errors"].append(f"{exc} (the soul MCP server will refuse to start until it is fixed or moved away)")
        return
    from soulgraph.hermes.seed import backups, flagged_report, seed_graph  # only here: it loads the memory scanner

    graph, warnings = seed_graph(home, include_backups=include_backups)
    report["warnings"] += [f"seed: {w}" for w in warnings]
    report["seed_flagged"] = flagged_report(graph)
    report["seed_skipped"] = [] if include_backups else backups(home)
    report["seed_nodes"] = len(graph)
    report["seed"] = "created"
    if check:
        return
    try:
        SoulFile(soul_path).save(graph)
    except (SoulFileError, OSError) as exc:
        _fail(report, "seed", f"{soul_path} could not be written ({exc})")


def _scopes_report(soul: SoulFile, graph: Any) -> dict[str, Any]:
    """Whose memories the soul holds (memory/scopes.py), and what the next write does to a
    soul written before scopes: nothing is rewritten here."""
    users = len(graph.scopes)
    scoped = sum(len(ids) for ids in graph.scopes.values())
    report: dict[str, Any] = {"shared": len(graph) - scoped, "users": users, "user_memories": scoped}
    schema = soul._schema
    if schema is not None and schema < SCHEMA:
        report["migration"] = (f"{soul.path.name} is schema {schema}, from before scopes: its {len(graph):,} "
                               f"memories are read as shared (every user of the agent sees them). The next "
                               f"write rewrites it as schema {SCHEMA} after a backup, "
                               f"{soul.path.name}.bak-schema{schema}; nothing is rewritten now")
    return report


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
    parser.add_argument("--python", help="the Python that runs the MCP server (default: the Python running this installer)",
                        default=None)
    parser.add_argument("--toolsets", type=parse_toolsets, default=DEFAULT_TOOLSETS,
                        help="the toolsets the Hermes entry serves, e.g. graph,memory (default: graph, the 13 tools)")
    parser.add_argument("--memory-provider", choices=MEMORY_PROVIDER_CHOICES, default="auto",
                        help="auto: install the soulgraph memory provider plugin and select it unless config.yaml "
                        "names another provider; soulgraph: select it even then; none: leave plugins and "
                        "memory.provider alone (default: %(default)s)")
    parser.add_argument("--seed-backups", action="store_true",
                        help="when seeding soul.json, also read Hermes' backups of the memory files "
                        "(memories/*.md.bak.*; by default they are skipped and named in the report)")
    parser.add_argument("--mcp-scope", type=scopes.argument, default=None, metavar="SCOPE",
                        help="whose memories the MCP server serves besides the shared ones: 'shared' or "
                        "'platform:user' (default: what the entry passes now, else shared)")
    parser.add_argument("--remove", action="store_true",
                        help="take everything out again: config.yaml as it was before the first install "
                        "(byte for byte when untouched since), the skill, the plugin; soul.json is kept")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if args.remove:
        report = uninstall(args.hermes_home, check=args.check)
    else:
        report = install(args.hermes_home, check=args.check, python=args.python, toolsets=args.toolsets,
                         memory_provider=args.memory_provider, seed_backups=args.seed_backups,
                         mcp_scope=args.mcp_scope)
    if not args.check and report.get("hermes_home"):
        # What a later deploy compares to skip a run that would change nothing (install_record.py).
        home = Path(report["hermes_home"])
        if args.remove or report["status"] not in ("changed", "unchanged"):
            install_record.forget(home)
        else:
            install_record.write(home, argv)
    print(json.dumps(report, indent=2, ensure_ascii=False))
    if args.check and report.get("config_diff"):
        print(report["config_diff"], file=sys.stderr, end="")
    return 1 if report["status"] == "error" else 0


if __name__ == "__main__":
    sys.exit(main())
