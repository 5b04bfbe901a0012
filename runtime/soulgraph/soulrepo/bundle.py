"""What a harness gets from a layered soul (seed 003, "Adapter expectations"; `soulrepo bundle`).

- `pi`, `codex`, `claude-code`, `zot`: the minimal identity bundle, one text for an appended
  system prompt: SOUL.md, USER.md, IDENTITY.md, then AGENTS.md's rules. No sessions, no
  memory layers: durable memory stays in the memory fabric.
- `colibri`: the import-source view, as JSON lines: one line per reviewed skill
  (`{"type": "skill", "path": …}`) and one per curated memory entry
  (`{"type": "memory", "path": …, "entry": n, "text": …}`).

The repository is validated first; an invalid one gives no bundle. Given a soul graph
(`soul_file`, e.g. the soul.json of the home the repository was exported from or imported
into), no line or entry holding the text of a memory it holds flagged (memory/flagged.py: it
reads like prompt injection) is in the bundle; `soulrepo export` leaves them out already.
"""

from __future__ import annotations

import json
from pathlib import Path

from soulgraph.memory import flagged
from soulgraph.soulrepo.validate import validate

PROMPT_HARNESSES = ("pi", "codex", "claude-code", "zot")
HARNESSES = (*PROMPT_HARNESSES, "colibri")
SECTIONS = (("soul", "Soul"), ("user", "User"), ("identity", "Identity"), ("harness_rules", "Rules"))


class BundleError(Exception):
    """No bundle: the message says why (an invalid repository lists its problems)."""


def _flagged_lines(soul_file: str | Path | None) -> dict:
    if soul_file is None:
        return {}
    from soulgraph.store import SoulFile, SoulFileError

    soul = SoulFile(Path(soul_file))
    if not soul.path.exists() and not soul.journal_path.exists():
        raise BundleError(f"no soul file at {soul_file}")
    try:
        return flagged.lines(soul.graph())
    except SoulFileError as exc:
        raise BundleError(str(exc)) from None


def bundle(repo: str | Path, harness: str, soul_file: str | Path | None = None) -> str:
    if harness not in HARNESSES:
        raise BundleError(f"unknown harness {harness!r} (harnesses: {', '.join(HARNESSES)})")
    root = Path(repo)
    report = validate(root)
    if not report.ok:
        raise BundleError(f"{root} is not a valid layered soul:\n" + "\n".join(f"  {p}" for p in report.problems))
    core = report.manifest["core_files"]
    needles = _flagged_lines(soul_file)
    if harness in PROMPT_HARNESSES:
        parts = []
        for role, title in SECTIONS:
            if role in core:
                text = flagged.without_lines((root / core[role]).read_text(encoding="utf-8"), needles)[0].strip()
                if text:
                    parts.append(f"## {title} ({core[role]})\n\n{text}")
        return "\n\n".join(parts) + "\n"
    lines = [json.dumps({"type": "skill", "path": path}) for path in report.files.get("skills", [])
             if path.endswith("SKILL.md")]
    for path in report.files.get("memory", []):
        entry = 0
        for raw in (root / path).read_text(encoding="utf-8").splitlines():
            if raw.startswith(("- ", "* ")):
                entry += 1
                if needles and flagged.holder(raw, needles) is not None:
                    continue  # its number stays: entry n is the same entry with or without a soul file
                lines.append(json.dumps({"type": "memory", "path": path, "entry": entry, "text": raw[2:].strip()},
                                        ensure_ascii=False))
    return "\n".join(lines) + ("\n" if lines else "")
