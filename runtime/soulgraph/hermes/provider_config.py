"""`memory.provider` in a Hermes config.yaml: select our provider without taking over another.

Hermes runs one external memory provider at a time, the one `memory.provider` names. The
installer selects `soulgraph` when the key is unset or empty; when it names another provider,
that is the user's choice and is left alone unless they ask (`--memory-provider soulgraph`).
As for the MCP entry (hermes/config.py), only the lines concerned are edited, the result is
parsed again and compared with what was meant, and ruamel.yaml's round trip is the fallback.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from soulgraph.hermes.config import MARKER_COMMENT, ConfigError, _kind, _load, _trim, _value_end, plain, rewrite_whole

SECTION, KEY = "memory", "provider"
OURS = "soulgraph"


@dataclass
class ProviderEdit:
    status: str  # selected | unchanged | taken | replaced
    before: Any  # what memory.provider was (None: not set)
    new_text: str
    warnings: list[str]


def current_provider(text: str, label: str = "config.yaml") -> Any:
    doc = _load(text, label) or {}
    section = doc.get(SECTION) if isinstance(doc, dict) else None
    return section.get(KEY) if isinstance(section, dict) else None


def plan_provider(text: str, take_over: bool = False, label: str = "config.yaml") -> ProviderEdit:
    """What config.yaml should become so Hermes uses our provider; ConfigError when it
    cannot be edited safely."""
    doc = _load(text, label)
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError(f"{label} holds a YAML {_kind(doc)}, not a mapping of settings; left untouched")
    section = doc.get(SECTION)
    if section is not None and not isinstance(section, dict):
        raise ConfigError(f"{label}: {SECTION} is a {_kind(section)}, but Hermes expects a mapping; left untouched")
    before = section.get(KEY) if section else None
    if before == OURS:
        return ProviderEdit("unchanged", before, text, [])
    if before not in (None, "") and not take_over:
        return ProviderEdit("taken", before, text, [
            f"{label}: {SECTION}.{KEY} is {before!r}, the user's choice; the soulgraph provider was neither "
            f"installed nor selected (python -m soulgraph.install --memory-provider soulgraph does both)"])
    return _edit(text, doc, OURS, label, "replaced" if before not in (None, "") else "selected", before)


def plan_restore(text: str, before: Any, label: str = "config.yaml") -> ProviderEdit:
    """config.yaml with `memory.provider` as it was before we selected ours (`before`: the
    value then, None when the key was absent). Unchanged when it no longer names ours."""
    doc = _load(text, label) or {}
    section = doc.get(SECTION) if isinstance(doc, dict) else None
    now = section.get(KEY) if isinstance(section, dict) else None
    if now != OURS:
        return ProviderEdit("unchanged", now, text, [])
    return _edit(text, doc, before, label, "restored", now)


def _edit(text: str, doc: Any, value: Any, label: str, status: str, before: Any) -> ProviderEdit:
    expected = plain(doc)
    section = dict(expected.get(SECTION) or {})
    if value is None:
        section.pop(KEY, None)
    else:
        section[KEY] = value
    if section or value is not None:
        expected[SECTION] = section
    else:
        expected.pop(SECTION, None)
    warnings = []
    new_text = _splice(text, doc, value)
    if new_text is None or plain(_load(new_text, label) or {}) != expected:
        new_text = _dump_whole(text, value)
        warnings.append(f"{label}: its layout could not be edited in place, so ruamel.yaml re-wrote it "
                        "(comments kept; indentation or quoting elsewhere may differ; a backup was taken)")
        if plain(_load(new_text, label) or {}) != expected:
            raise ConfigError(f"{label}: could not set {SECTION}.{KEY} without changing other settings; left untouched")
    return ProviderEdit(status, before, new_text, warnings)


def _line(indent: int, value: Any, newline: str) -> str:
    if value is None:
        return ""
    shown = "''" if value == "" else value
    return f"{' ' * indent}{KEY}: {shown}  {MARKER_COMMENT}{newline}" if value == OURS else \
        f"{' ' * indent}{KEY}: {shown}{newline}"


def _splice(text: str, doc: Any, value: Any) -> str | None:
    """Edit only the provider line (or add it, or its section); None for layouts we leave to ruamel."""
    keys = list(doc.keys()) if hasattr(doc, "lc") else []
    if keys and doc.lc.key(keys[0])[1] != 0:
        return None
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)

    def replace(start: int, end: int, new: list[str]) -> str:
        before = lines[:start]
        if before and end == len(lines) and not before[-1].endswith(("\n", "\r")):
            before[-1] += newline
        return "".join(before + new + lines[end:])

    if SECTION not in keys:
        if value is None:
            return text
        return replace(len(lines), len(lines), [f"{SECTION}:{newline}", _line(2, value, newline)])
    section = doc[SECTION]
    top = doc.lc.key(SECTION)[0]
    end = _trim(lines, top, _value_end(doc, SECTION, len(lines)))
    if not section:  # `memory:` with nothing under it
        if end != top + 1 or "{" in lines[top]:
            return None
        return replace(top + 1, top + 1, [_line(2, value, newline)] if value is not None else [])
    if not all(section.lc.key(k)[0] > top for k in section):
        return None  # flow style
    indent = section.lc.key(next(iter(section)))[1]
    if KEY in section:
        start = section.lc.key(KEY)[0]
        stop = _trim(lines, start, _value_end(section, KEY, end))
        if stop != start + 1:
            return None  # a value over several lines
        if value is None and len(section) == 1:
            return replace(top, end, [])  # the section held only our key: it goes with it
        return replace(start, stop, [_line(indent, value, newline)] if value is not None else [])
    if value is None:
        return text
    return replace(end, end, [_line(indent, value, newline)])


def _dump_whole(text: str, value: Any) -> str:
    def put(doc: Any) -> None:
        section = doc.get(SECTION)
        if value is None:
            if isinstance(section, dict):
                section.pop(KEY, None)
                if not section:
                    del doc[SECTION]
            return
        if not isinstance(section, dict):
            doc[SECTION] = section = {}
        if hasattr(section, "fa"):
            section.fa.set_block_style()
        section[KEY] = value

    return rewrite_whole(text, put)
