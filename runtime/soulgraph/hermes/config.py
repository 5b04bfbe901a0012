"""Put one `mcp_servers.<name>` entry into a Hermes config.yaml, changing nothing else.

Round-tripping a whole YAML file through a library re-indents and re-wraps what the
user wrote, so the text is edited in place instead: ruamel.yaml's round-trip parser
says on which lines our entry (or the `mcp_servers` block) sits, only those lines are
replaced or inserted, and the result is parsed again and compared with what was
meant. Only when that check fails (an unusual layout, such as a flow-style
`mcp_servers: {a: …}`) is the document re-written by ruamel.yaml's round-trip dumper,
with a warning; if even that does not give the intended data, nothing is written.
"""

from __future__ import annotations

import difflib
import io
from dataclasses import dataclass, field
from typing import Any, Callable

from ruamel.yaml import YAML
from ruamel.yaml.util import load_yaml_guess_indent

SERVERS_KEY = "mcp_servers"
MARKER_COMMENT = "# managed by python -m soulgraph.install"


class ConfigError(Exception):
    """config.yaml cannot be edited safely; it is left untouched."""


@dataclass
class ConfigEdit:
    status: str  # "added", "updated" or "unchanged"
    old_text: str
    new_text: str
    entry: dict[str, Any]  # the entry as it will be
    warnings: list[str] = field(default_factory=list)

    def diff(self, label: str) -> str:
        return "".join(difflib.unified_diff(
            self.old_text.splitlines(keepends=True), self.new_text.splitlines(keepends=True),
            fromfile=label, tofile=f"{label} (after install)",
        ))


def plain(value: Any) -> Any:
    """ruamel's commented containers as plain dicts and lists (comments dropped)."""
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, (int, float, bool)) else k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, str):
        return str(value)  # ruamel's quoted/plain string subclasses
    return value


def _kind(value: Any) -> str:
    """A YAML value's kind in the words a user would use (not ruamel's class names)."""
    for types, word in ((bool, "boolean"), (dict, "mapping"), (list, "list"), (str, "string"), ((int, float), "number")):
        if isinstance(value, types):
            return word
    return type(value).__name__


def load(text: str, label: str) -> Any:
    """config.yaml's settings as plain dicts and lists; ConfigError when it is not YAML."""
    return plain(_load(text, label))


def _load(text: str, label: str) -> Any:
    try:
        return YAML(typ="rt").load(text)
    except Exception as exc:  # ruamel raises many error types; all mean "cannot parse"
        mark, problem = getattr(exc, "problem_mark", None), getattr(exc, "problem", None)
        if mark is not None and problem:
            detail = f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
        else:
            detail = " ".join(str(exc).split())
        raise ConfigError(f"{label} is not valid YAML ({type(exc).__name__}: {detail}); left untouched") from None


def merge_entry(existing: Any, managed: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """Our keys set, the user's other keys (env, include lists, …) kept, defaults only
    where the user has said nothing."""
    if not isinstance(existing, dict):
        # A new entry reads best with its scalars first and nested settings last.
        existing = {**{k: v for k, v in managed.items() if not isinstance(v, dict)}, **defaults}
    merged = dict(plain(existing))
    for key, value in managed.items():
        if isinstance(value, dict):
            sub = merged.get(key)
            sub = dict(sub) if isinstance(sub, dict) else {}
            sub.update(value)
            merged[key] = sub
        else:
            merged[key] = value
    for key, value in defaults.items():
        merged.setdefault(key, value)
    return merged


def plan_entry(text: str, name: str, managed: dict[str, Any], defaults: dict[str, Any],
               label: str = "config.yaml") -> ConfigEdit:
    """What config.yaml should become for `mcp_servers.<name>`; raises ConfigError when
    the file cannot be edited safely."""
    doc = _load(text, label)
    if doc is None:  # empty, or only comments
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError(f"{label} holds a YAML {_kind(doc)}, not a mapping of settings; left untouched")
    servers = doc.get(SERVERS_KEY)
    if servers is not None and not isinstance(servers, dict):
        raise ConfigError(
            f"{label}: {SERVERS_KEY} is a {_kind(servers)}, but Hermes expects a mapping "
            f"of server name -> settings; left untouched"
        )
    existing = servers.get(name) if servers else None
    if existing is not None and not isinstance(existing, dict):
        raise ConfigError(f"{label}: {SERVERS_KEY}.{name} is a {_kind(existing)}, not a mapping; left untouched")
    entry = merge_entry(existing, managed, defaults)
    warnings = []
    if entry.get("enabled") is False:
        warnings.append(f"{label}: {SERVERS_KEY}.{name} has enabled: false; left as set, so Hermes will not load it")
    if servers is not None and name in servers:
        if entry == plain(existing):
            return ConfigEdit("unchanged", text, text, entry, warnings)
        status = "updated"
    else:
        status = "added"
    expected = plain(doc)
    expected.setdefault(SERVERS_KEY, None)
    expected[SERVERS_KEY] = {**(expected[SERVERS_KEY] or {}), name: entry}
    new_text = _splice(text, doc, name, entry)
    if new_text is None or plain(_load(new_text, label)) != expected:
        new_text = _dump_whole(text, name, entry)
        warnings.append(f"{label}: its layout could not be edited in place, so ruamel.yaml re-wrote it "
                        "(comments kept; indentation or quoting elsewhere may differ; a backup was taken)")
        if plain(_load(new_text, label)) != expected:
            raise ConfigError(f"{label}: could not add {SERVERS_KEY}.{name} without changing other settings; left untouched")
    return ConfigEdit(status, text, new_text, entry, warnings)


# --------------------------------------------------------------------- text editing
def render_entry(name: str, entry: dict[str, Any], indent: int, newline: str) -> list[str]:
    yaml = YAML(typ="rt")
    yaml.default_flow_style = None  # short lists and maps on one line: args: [-m, …]
    yaml.width = 4096  # never fold a long path
    buf = io.StringIO()
    yaml.dump({name: entry}, buf)
    lines = buf.getvalue().splitlines()
    lines[0] = f"{lines[0]}  {MARKER_COMMENT}"
    return [" " * indent + line + newline for line in lines]


def _is_filler(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def _trim(lines: list[str], start: int, end: int) -> int:
    """End of a region without the blank and comment lines that close it: those
    belong to whatever follows, and stay where they are."""
    while end > start + 1 and _is_filler(lines[end - 1]):
        end -= 1
    return end


def _value_end(mapping: Any, key: Any, outer_end: int) -> int:
    """First line after `key`'s value in a block mapping: the next key's line."""
    keys = list(mapping.keys())
    position = keys.index(key)
    if position + 1 < len(keys):
        return mapping.lc.key(keys[position + 1])[0]
    return outer_end


def _is_block(mapping: Any, key_line: int) -> bool:
    return bool(mapping) and all(mapping.lc.key(k)[0] > key_line for k in mapping)


def _splice(text: str, doc: Any, name: str, entry: dict[str, Any]) -> str | None:
    """Edit only our lines; None when the layout is one we do not edit by hand."""
    if not hasattr(doc, "lc"):  # empty file: nothing to keep but its comments
        doc_keys: list[Any] = []
    else:
        doc_keys = list(doc.keys())
        if doc_keys and doc.lc.key(doc_keys[0])[1] != 0:
            return None  # a flow-style or indented top level
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)

    def replace(start: int, end: int, new: list[str]) -> str:
        before = lines[:start]
        if before and end == len(lines) and not before[-1].endswith(("\n", "\r")):
            before[-1] += newline  # appending after a last line that had no newline
        return "".join(before + new + lines[end:])

    if SERVERS_KEY not in doc_keys:
        return replace(len(lines), len(lines), [SERVERS_KEY + ":" + newline] + render_entry(name, entry, 2, newline))
    servers = doc[SERVERS_KEY]
    top_line = doc.lc.key(SERVERS_KEY)[0]
    top_end = _trim(lines, top_line, _value_end(doc, SERVERS_KEY, len(lines)))
    if not servers:  # `mcp_servers:`, `mcp_servers: {}` or `mcp_servers: null`
        if top_end != top_line + 1:
            return None  # an empty value spread over several lines: rare, let ruamel do it
        comment = lines[top_line].partition("#")[2].rstrip("\r\n")
        key_line = SERVERS_KEY + ":" + (f"  #{comment}" if comment else "") + newline
        return replace(top_line, top_end, [key_line] + render_entry(name, entry, 2, newline))
    if not _is_block(servers, top_line):
        return None
    indent = servers.lc.key(next(iter(servers)))[1]
    if name not in servers:
        return replace(top_end, top_end, render_entry(name, entry, indent, newline))
    start = servers.lc.key(name)[0]
    end = _trim(lines, start, _value_end(servers, name, top_end))
    return replace(start, end, render_entry(name, entry, indent, newline))


def rewrite_whole(text: str, edit: Callable[[Any], None]) -> str:
    """The fallback for layouts not edited by hand: ruamel.yaml's round trip of the whole
    document, with the file's own indentation, after `edit(document)`."""
    _data, indent, block_seq_indent = load_yaml_guess_indent(text)
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=indent or 2, sequence=indent or 2, offset=block_seq_indent or 0)
    doc = yaml.load(text) or {}
    edit(doc)
    buf = io.StringIO()
    yaml.dump(doc, buf)
    return buf.getvalue()


def _dump_whole(text: str, name: str, entry: dict[str, Any]) -> str:
    def put(doc: Any) -> None:
        servers = doc.get(SERVERS_KEY)
        if not servers:
            doc[SERVERS_KEY] = servers = {}
        if hasattr(servers, "fa"):
            servers.fa.set_block_style()
        servers[name] = entry

    return rewrite_whole(text, put)


def plan_remove_entry(text: str, name: str, label: str = "config.yaml") -> ConfigEdit:
    """config.yaml without `mcp_servers.<name>` (an `mcp_servers` left empty goes too)."""
    doc = _load(text, label)
    servers = doc.get(SERVERS_KEY) if isinstance(doc, dict) else None
    if not isinstance(servers, dict) or name not in servers:
        return ConfigEdit("absent", text, text, {})
    expected = plain(doc)
    del expected[SERVERS_KEY][name]
    if not expected[SERVERS_KEY]:
        del expected[SERVERS_KEY]
    new_text, warnings = _cut_entry(text, doc, name), []
    if new_text is None or plain(_load(new_text, label) or {}) != expected:
        def cut(doc: Any) -> None:
            del doc[SERVERS_KEY][name]
            if not doc[SERVERS_KEY]:
                del doc[SERVERS_KEY]

        new_text = rewrite_whole(text, cut)
        warnings.append(f"{label}: its layout could not be edited in place, so ruamel.yaml re-wrote it")
        if plain(_load(new_text, label) or {}) != expected:
            raise ConfigError(f"{label}: could not remove {SERVERS_KEY}.{name} without changing other settings; left untouched")
    return ConfigEdit("removed", text, new_text, {}, warnings)


def _cut_entry(text: str, doc: Any, name: str) -> str | None:
    lines = text.splitlines(keepends=True)
    servers = doc[SERVERS_KEY]
    top = doc.lc.key(SERVERS_KEY)[0]
    if doc.lc.key(SERVERS_KEY)[1] != 0 or not _is_block(servers, top):
        return None
    top_end = _trim(lines, top, _value_end(doc, SERVERS_KEY, len(lines)))
    if len(servers) == 1:
        return "".join(lines[:top] + lines[top_end:])
    start = servers.lc.key(name)[0]
    end = _trim(lines, start, _value_end(servers, name, top_end))
    return "".join(lines[:start] + lines[end:])
