"""Is this folder a layered soul repository we can import? (seed 003; `soulrepo validate DIR`)

Checked, each problem reported with the path it concerns:
- `manifest.json`: present, JSON, and valid against the schema we ship
  (`layered-soul.v1.schema.json`, JSON Schema 2020-12, checked with `jsonschema`);
- the core files the manifest names (soul, user, identity; harness_rules when named): present,
  regular files, inside the repository;
- every `layered_imports` glob: relative, inside the repository, matching at least one file;
  no matched file leads outside through a symlink;
- no secrets in any text file (the write-time scanner; the report names the rule, never the
  secret);
- no runtime artifacts (`__pycache__/`, `*.pyc`, lock files, `.DS_Store`);
- every line of a `learned` layer file is a memory `learned.py` reads (content, kind, scope, …).

`.git/` is not looked into.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soulgraph.memory.scanner import scan
from soulgraph.soulrepo import learned

SCHEMA_ID = "clawdie.layered-soul.v1"
SCHEMA_FILE = Path(__file__).with_name("layered-soul.v1.schema.json")
ARTIFACT_NAMES = {"__pycache__", ".DS_Store", "Thumbs.db"}
ARTIFACT_SUFFIXES = (".pyc", ".pyo", ".lock", ".swp")
TEXT_LIMIT = 2 << 20  # larger files are not scanned as text (and are reported)


@dataclass(frozen=True)
class Problem:
    path: str  # relative to the repository ("manifest.json", "skills/x/SKILL.md", "." for the whole)
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass
class Report:
    repo: str
    manifest: dict[str, Any] | None = None
    problems: list[Problem] = field(default_factory=list)
    files: dict[str, list[str]] = field(default_factory=dict)  # import layer -> matched files

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def as_dict(self) -> dict[str, Any]:
        return {"repo": self.repo, "ok": self.ok, "problems": [{"path": p.path, "message": p.message} for p in self.problems],
                "files": self.files}


def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


def validate(repo: str | os.PathLike[str]) -> Report:
    root = Path(repo)
    report = Report(str(root))
    if not root.is_dir():
        report.add(".", f"{root} is not a directory")
        return report
    manifest = _manifest(root, report)
    if isinstance(manifest, dict):  # checked as far as its shape allows, so every problem shows at once
        report.manifest = manifest
        _core_files(root, manifest, report)
        _imports(root, manifest, report)
    _walk(root, report)
    return report


def _manifest(root: Path, report: Report) -> dict[str, Any] | None:
    path = root / "manifest.json"
    if not path.is_file():
        report.add("manifest.json", "missing: a layered soul starts with its manifest")
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        report.add("manifest.json", "not UTF-8 text")
        return None
    except ValueError as exc:
        report.add("manifest.json", f"not JSON ({exc})")
        return None
    if isinstance(data, dict) and data.get("schema") not in (None, SCHEMA_ID):
        report.add("manifest.json", f"schema is {data.get('schema')!r}; this version reads {SCHEMA_ID!r} only")
        return None
    import jsonschema  # the MCP SDK's own dependency: always installed with the runtime

    checker = jsonschema.Draft202012Validator(schema(), format_checker=jsonschema.FormatChecker())
    errors = sorted(checker.iter_errors(data), key=lambda e: list(e.absolute_path))
    for error in errors:
        where = "/".join(str(part) for part in error.absolute_path) or "(top level)"
        report.add("manifest.json", f"{where}: {_plain_error(error)}")
    # jsonschema checks date-time only with an optional package installed: checked here instead.
    stamp = data.get("updated_at") if isinstance(data, dict) else None
    if isinstance(stamp, str):
        try:
            datetime.fromisoformat(stamp)
        except ValueError:
            errors.append(None)
            report.add("manifest.json", f"updated_at: {stamp!r} is not an ISO 8601 date-time (2026-06-13T00:00:00Z)")
    return data


def _plain_error(error: Any) -> str:
    if error.validator == "not":  # only relative_path uses `not`
        return f"{error.instance!r} must be a relative path inside the repository (no leading /, no .., no \\)"
    return error.message


def _inside(root: Path, path: Path) -> bool:
    real, base = Path(os.path.realpath(path)), root.resolve()
    return real == base or base in real.parents


def _safe(relative: Any) -> bool:
    """A path the schema accepts (the schema reports the others)."""
    return (isinstance(relative, str) and bool(relative) and not relative.startswith("/") and "\\" not in relative
            and ".." not in relative.split("/"))


def _core_files(root: Path, manifest: dict[str, Any], report: Report) -> None:
    core = manifest.get("core_files")
    for role, relative in (core.items() if isinstance(core, dict) else ()):
        if not _safe(relative):
            continue
        path = root / relative
        if not path.exists() and not path.is_symlink():
            report.add(relative, f"missing: the manifest names it as core file {role!r}")
            continue
        if not _inside(root, path):
            report.add(relative, "leads outside the repository (a symlink)")
        elif not path.is_file():
            report.add(relative, f"core file {role!r} is not a regular file")


def _imports(root: Path, manifest: dict[str, Any], report: Report) -> None:
    layers = manifest.get("layered_imports")
    for layer, globs in (layers.items() if isinstance(layers, dict) else ()):
        matched: list[str] = []
        for pattern in globs if isinstance(globs, list) else ():
            if not _safe(pattern):
                continue
            found = sorted(p for p in root.glob(pattern) if ".git" not in p.relative_to(root).parts)
            if not found:
                report.add(pattern, f"layered_imports.{layer}: the glob matches no file")
            for path in found:
                relative = path.relative_to(root).as_posix()
                if not _inside(root, path):
                    report.add(relative, f"layered_imports.{layer}: leads outside the repository (a symlink)")
                elif path.is_file():
                    matched.append(relative)
        report.files[layer] = sorted(set(matched))
        if layer == learned.LAYER:  # memories/learned/*.jsonl: every line a memory learned.py reads
            for relative, problem in learned.problems(root, report.files[layer]):
                report.add(relative, problem)


def _walk(root: Path, report: Report) -> None:
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in list(dirs):
            if name in ARTIFACT_NAMES:
                report.add((here / name).relative_to(root).as_posix() + "/", "a runtime artifact, not part of a soul")
                dirs.remove(name)
        for name in names:
            path = here / name
            relative = path.relative_to(root).as_posix()
            if name in ARTIFACT_NAMES or name.endswith(ARTIFACT_SUFFIXES):
                report.add(relative, "a runtime artifact, not part of a soul")
                continue
            if path.is_symlink() and not _inside(root, path):
                report.add(relative, "a symlink leading outside the repository")
                continue
            _secrets(path, relative, report)


def _secrets(path: Path, relative: str, report: Report) -> None:
    try:
        if path.stat().st_size > TEXT_LIMIT:
            report.add(relative, f"larger than {TEXT_LIMIT >> 20} MiB: not scanned; a soul holds text, not data")
            return
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return  # binary (an image): nothing the scanner reads
    except OSError as exc:
        report.add(relative, f"cannot be read ({exc.strerror})")
        return
    rules = sorted({finding.rule for finding in scan(text).secrets})
    if rules:
        report.add(relative, f"holds a secret ({', '.join(rules)}); secrets are excluded from a soul")
