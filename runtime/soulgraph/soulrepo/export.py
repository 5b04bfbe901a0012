"""A layered soul repository from a Hermes home (seed 003's portability table; `soulrepo export`).

| Hermes home | in the soul repo |
|---|---|
| SOUL.md | SOUL.md |
| memories/USER.md | USER.md, one bullet per entry, curated |
| memories/MEMORY.md | memories/curated/memory.md, one bullet per entry, curated |
| IDENTITY.md, AGENTS.md | copied when present (IDENTITY.md is otherwise written from the agent's name) |
| skills/ | only reviewed skills: `soul_export: true` in the SKILL.md frontmatter, or named by `--include` |
| config.yaml | never copied: adapters/hermes.md says what it held, not its values |
| sessions/ | never copied: adapters/hermes.md says how many there were (archive only) |
| soul.json (+ journal) | memories/learned/<month>.jsonl: the memories the agent learned (learned.py), typed, with provenance and scope |

Curated: an entry holding a secret, or reading like prompt injection, is left out, and the
report lists which (by file and entry number, never by content). So is the text of every
memory the home's soul graph (soul.json) holds flagged (memory/flagged.py): an entry of
USER.md / MEMORY.md that holds it is left out, and so is each line of SOUL.md, IDENTITY.md,
AGENTS.md and the exported skills that does; `flagged_left_out` counts them. Of the soul
graph's memories, the learned ones go to memories/learned/; every other memory is left out
and counted in `left_out` by reason (one item a reason, with `count`), and in `learned`. The
result is validated (`validate.py`) and committed to a new git repository.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from soulgraph.hermes.home import resolve_home
from soulgraph.memory import flagged
from soulgraph.memory.markdown_files import entries
from soulgraph.memory.scanner import scan
from soulgraph.soulrepo import learned
from soulgraph.soulrepo.validate import ARTIFACT_NAMES, ARTIFACT_SUFFIXES, SCHEMA_ID, validate

GIT_TIMEOUT = 60  # seconds, each git command
EXPORT_MARK = "soul_export: true"


class ExportError(Exception):
    """The export cannot be made; nothing was written."""


@dataclass
class ExportReport:
    out: str
    files: list[str] = field(default_factory=list)
    left_out: list[dict[str, Any]] = field(default_factory=list)  # {"path", "entry", "why"}; a learned-memory reason also "reason", "count", "ids"
    # The soul graph's memories: {"exported": n, "left_out": {reason: n}} (None: no soul graph).
    learned: dict[str, Any] | None = None
    skills: list[str] = field(default_factory=list)
    skipped_skills: list[str] = field(default_factory=list)
    commit: str | None = None
    problems: list[str] = field(default_factory=list)
    # Lines of the home's flagged memories (memory/flagged.py) -> (id, rules): never exported.
    flagged_lines: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict, repr=False)

    @property
    def flagged_left_out(self) -> int:
        return sum(1 for item in self.left_out if item.get("flagged"))

    def as_dict(self) -> dict[str, Any]:
        return {"out": self.out, "ok": not self.problems, "files": self.files, "left_out": self.left_out,
                "flagged_left_out": self.flagged_left_out, "learned": self.learned,
                "skills": self.skills, "skipped_skills": self.skipped_skills, "commit": self.commit,
                "problems": self.problems}

    def unflagged(self, text: str, source: str) -> str:
        """`text` without the lines that hold a flagged memory's, each one reported."""
        kept, gone = flagged.without_lines(text, self.flagged_lines)
        for number in gone:
            memory, rules = flagged.holder(text.splitlines()[number - 1], self.flagged_lines)
            self.left_out.append({"path": source, "entry": None, "line": number, "flagged": memory,
                                  "why": f"flagged memory {memory} ({', '.join(flagged.shown_rules(rules))})"})
        return kept


def _soul_graph(home: Path):
    """The home's soul graph with its journal's writes (None without one). Only read."""
    from soulgraph.store import SoulFile, SoulFileError

    soul = SoulFile(home / "soul.json")
    if not soul.path.exists() and not soul.journal_path.exists():
        return None
    try:
        return soul.graph()
    except SoulFileError as exc:
        raise ExportError(f"{exc}: the export carries its learned memories and leaves out what it holds "
                          "flagged, so it needs it readable") from None


def export(hermes_home: str | os.PathLike[str] | None, out: str | os.PathLike[str], *, include: Iterable[str] = (),
           agent_id: str | None = None, clock=time.time, commit: bool = True) -> ExportReport:
    home = resolve_home(hermes_home).path
    target = Path(out)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ExportError(f"{target} exists and is not an empty folder; export writes a new repository")
    if not (home / "config.yaml").is_file() and not (home / "SOUL.md").is_file():
        raise ExportError(f"{home} does not look like a Hermes home (no config.yaml, no SOUL.md)")
    report = ExportReport(str(target))
    graph = _soul_graph(home)
    report.flagged_lines = flagged.lines(graph) if graph is not None else {}
    name = agent_id or (home.name if home.parent.name == "profiles" else "hermes")
    target.mkdir(parents=True, exist_ok=True)
    try:
        _write_core(home, target, name, report)
        _write_memories(home, target, report)
        if graph is not None:
            _write_learned(home, graph, target, name, report)
        _write_skills(home, target, set(include), report)
        _write_adapter(home, target, report)
        _write_manifest(target, name, clock(), report)
        checked = validate(target)
        report.problems = [str(p) for p in checked.problems]
        if commit and not report.problems:
            report.commit = _commit(target)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)  # nothing half-written stays
        raise
    return report


def _put(target: Path, relative: str, text: str, report: ExportReport) -> None:
    path = target / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    report.files.append(relative)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _curated(text: str | None, source: str, report: ExportReport) -> list[str]:
    kept = []
    for number, entry in enumerate(entries(text or ""), 1):
        found = scan(entry)
        held = flagged.holder(entry, report.flagged_lines) if report.flagged_lines else None
        if held is not None:
            report.left_out.append({"path": source, "entry": number, "flagged": held[0],
                                    "why": f"flagged memory {held[0]} ({', '.join(flagged.shown_rules(held[1]))})"})
        elif found.secrets:
            report.left_out.append({"path": source, "entry": number, "why": f"secret ({', '.join(sorted({f.rule for f in found.secrets}))})"})
        elif found.injections:
            report.left_out.append({"path": source, "entry": number, "why": f"prompt injection ({', '.join(sorted({f.rule for f in found.injections}))})"})
        else:
            kept.append(entry)
    return kept


def _bullets(title: str, kept: list[str]) -> str:
    lines = [f"# {title}", ""]
    for entry in kept:
        first, *rest = entry.splitlines()
        lines.append(f"- {first}")
        lines += [f"  {line}" for line in rest]
    return "\n".join(lines) + "\n"


PLACEHOLDER_IDENTITY = re.compile(r"# Identity\n\nName: [^\n]+\nExported from a Hermes home\.\n")


def placeholder_identity(name: str) -> str:
    """The IDENTITY.md an export writes for a home that has none (the schema requires one). It
    says nothing the name does not: an import neither writes it nor makes axioms of it
    (`is_placeholder_identity`), so an export coming back to its home changes nothing."""
    return f"# Identity\n\nName: {name}\nExported from a Hermes home.\n"


def is_placeholder_identity(text: str) -> bool:
    return PLACEHOLDER_IDENTITY.fullmatch(text) is not None


def _write_core(home: Path, target: Path, name: str, report: ExportReport) -> None:
    soul = _read(home / "SOUL.md")
    if soul is not None:
        soul = report.unflagged(soul, "SOUL.md")
        kept = _curated(soul, "SOUL.md", report) if scan(soul).secrets else None
        _put(target, "SOUL.md", soul if kept is None else "\n\n".join(kept) + "\n", report)
    else:
        _put(target, "SOUL.md", f"# {name}\n", report)
    _put(target, "USER.md", _bullets("User", _curated(_read(home / "memories" / "USER.md"), "memories/USER.md", report)), report)
    identity = _read(home / "IDENTITY.md")
    if identity is not None and not scan(identity).secrets:
        _put(target, "IDENTITY.md", report.unflagged(identity, "IDENTITY.md"), report)
    else:
        _put(target, "IDENTITY.md", placeholder_identity(name), report)
    rules = _read(home / "AGENTS.md")
    if rules is not None and not scan(rules).secrets:
        _put(target, "AGENTS.md", report.unflagged(rules, "AGENTS.md"), report)


def _write_memories(home: Path, target: Path, report: ExportReport) -> None:
    kept = _curated(_read(home / "memories" / "MEMORY.md"), "memories/MEMORY.md", report)
    if kept:
        _put(target, "memories/curated/memory.md", _bullets("Memory", kept), report)


def _write_learned(home: Path, graph, target: Path, name: str, report: ExportReport) -> None:
    chosen = learned.select(graph, name, learned.home_identity(home), report.flagged_lines)
    for name, text in chosen.files().items():
        _put(target, f"{learned.FOLDER}/{name}", text, report)
    for reason, ids in chosen.left_out.items():
        report.left_out.append({"path": f"{learned.FOLDER}/", "entry": None, "reason": reason, "count": len(ids),
                                "why": f"{reason} ({learned.REASONS.get(reason, reason)})", "ids": ids[:10]})
    report.learned = {"exported": len(chosen.lines),
                      "left_out": {reason: len(ids) for reason, ids in chosen.left_out.items()}}


def _write_skills(home: Path, target: Path, include: set[str], report: ExportReport) -> None:
    skills = home / "skills"
    for skill_file in sorted(skills.rglob("SKILL.md")) if skills.is_dir() else ():
        folder = skill_file.parent
        relative = folder.relative_to(skills)
        if any(part.startswith(".") for part in relative.parts):
            continue  # Hermes' hub and archive folders
        text = _read(skill_file) or ""
        head = text.split("\n---", 2)[0] if text.startswith("---") else ""
        if folder.name not in include and EXPORT_MARK not in head:
            report.skipped_skills.append(relative.as_posix())
            continue
        for path in sorted(folder.rglob("*")):
            inner = path.relative_to(folder)
            if path.is_dir() or path.is_symlink() or any(p in ARTIFACT_NAMES for p in inner.parts) \
                    or path.name.endswith(ARTIFACT_SUFFIXES):
                continue
            content = _read(path)
            where = f"skills/{relative.as_posix()}/{inner.as_posix()}"
            if content is None:
                continue  # binary: a soul holds text
            if scan(content).secrets:
                report.left_out.append({"path": where, "entry": None, "why": "secret"})
                continue
            _put(target, where, report.unflagged(content, where), report)
        report.skills.append(relative.as_posix())


def _write_adapter(home: Path, target: Path, report: ExportReport) -> None:
    sessions = home / "sessions"
    count = sum(1 for p in sessions.rglob("*") if p.is_file()) if sessions.is_dir() else 0
    _put(target, "adapters/hermes.md", (
        "# Hermes\n\n"
        "Mode: profile-restore. `python -m soulgraph.soulrepo import DIR --hermes-home H` restores the\n"
        "core files, the reviewed skills, the curated memories and the learned ones into a Hermes home.\n\n"
        "- config.yaml is Hermes-specific and was not exported (its model, keys and servers stay\n"
        "  on the host; `python -m soulgraph.install` writes the soul graph's own entries).\n"
        f"- sessions/: {count} file{'s' if count != 1 else ''} on the exporting host, archive only, not exported.\n"), report)


def _write_manifest(target: Path, name: str, now: float, report: ExportReport) -> None:
    core = {"soul": "SOUL.md", "user": "USER.md", "identity": "IDENTITY.md"}
    if (target / "AGENTS.md").exists():
        core["harness_rules"] = "AGENTS.md"
    imports = {}
    if report.skills:
        imports["skills"] = ["skills/**/*.md"]
    if (target / "memories" / "curated").is_dir():
        imports["memory"] = ["memories/curated/**/*.md"]
    if (target / learned.FOLDER).is_dir():
        imports[learned.LAYER] = [learned.GLOB]
    manifest = {
        "schema": SCHEMA_ID, "agent_id": name, "display_name": name.capitalize(), "owner": "operator-controlled",
        "updated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "core_files": core, "layered_imports": imports,
        "privacy": {"raw_sessions": "archive-only", "secrets": "excluded", "operator_review_required": True},
        "adapters": {"hermes": {"mode": "profile-restore"}},
    }
    _put(target, "manifest.json", json.dumps(manifest, indent=2) + "\n", report)


def _commit(target: Path) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "soulgraph export", "GIT_AUTHOR_EMAIL": "soulgraph@localhost",
           "GIT_COMMITTER_NAME": "soulgraph export", "GIT_COMMITTER_EMAIL": "soulgraph@localhost",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}

    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", "-C", str(target), *args], capture_output=True, text=True, env=env,
                                  timeout=GIT_TIMEOUT, stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise ExportError("git is not installed; export with --no-commit, or install git") from None
        except subprocess.TimeoutExpired:
            raise ExportError(f"git {args[0]} did not finish in {GIT_TIMEOUT} s") from None
        if done.returncode != 0:
            raise ExportError(f"git {args[0]} failed: {done.stderr.strip()[:300]}")
        return done.stdout.strip()

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "Layered soul exported from a Hermes home")
    return git("rev-parse", "HEAD")
