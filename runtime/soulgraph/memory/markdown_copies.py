"""A memory's text written into markdown files too, and taken out of them again at a forget.

A note from the markdown toolset (`soul_remember`, `soul_ask`: source `markdown:<path>`) or from
Hermes' own memory tool, mirrored by the provider (`hermes:memory_tool:memory|user`), lives in
two places: the graph and MEMORY.md / USER.md. A hard forget (`soul_forget`, `forget-user`)
takes it out of both: `copies` finds where a memory's text was written, and `scrub` removes
exactly that entry from each file, never a part of another entry.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from soulgraph.memory import markdown_files as files
from soulgraph.store.atomic import write_atomically

# Who put a memory's text into a markdown file, besides the graph: the writers of this
# toolset (source `markdown:<path as given>`), and Hermes' own memory tool as the provider
# mirrors it (hermes/memory_service.py: source `hermes:memory_tool:<target>`).
MARKDOWN_WRITERS = ("tool:soul_remember", "tool:soul_ask", "operator:soulgraph.memories")  # the last: an edit
MARKDOWN_SOURCE = "markdown:"
HERMES_MEMORY_FILES = {"hermes:memory_tool:memory": "memories/MEMORY.md", "hermes:memory_tool:user": "memories/USER.md"}


def copies(node: Any) -> list[tuple[str, str]]:
    """(file as its writer named it, text) for each copy of `node`'s text a markdown write
    made: its own, and those of the memories merged into it (they keep their source)."""
    found = []
    if node.writer in MARKDOWN_WRITERS and node.source.startswith(MARKDOWN_SOURCE):
        found.append((node.source[len(MARKDOWN_SOURCE):], node.content))
    elif node.source in HERMES_MEMORY_FILES:
        found.append((HERMES_MEMORY_FILES[node.source], node.content))
    for merged in node.metadata.get("merged_from", ()):
        source, content = str(merged.get("source") or ""), merged.get("content")
        if not isinstance(content, str):
            continue
        if source.startswith(MARKDOWN_SOURCE):
            found.append((source[len(MARKDOWN_SOURCE):], content))
        elif source in HERMES_MEMORY_FILES:
            found.append((HERMES_MEMORY_FILES[source], content))
    return [(path, text.strip()) for path, text in found if text.strip()]


@dataclass
class Scrubbed:
    """What a forget did to the markdown files: the files it rewrote without the text,
    and the ones that still hold it inside another entry (left for a person to edit)."""

    files: list[str]
    inside_other_entries: list[str]


def _bullet(note: str) -> str:
    """The block `files.append` writes for `note` in a plain markdown file."""
    return "\n".join(("- " if i == 0 else "  ") + line for i, line in enumerate(note.splitlines())) + "\n"


def _without_block(text: str, block: str, instead: str = "") -> str:
    """`text` without each copy of `block` that stands on lines of its own (a bullet that
    goes on in indented lines is another note), `instead` in its place."""
    kept, start, at = [], 0, text.find(block)
    while at >= 0:
        end = at + len(block)
        if (at == 0 or text[at - 1] == "\n") and not text.startswith("  ", end):
            kept += [text[start:at], instead]
            start = end
            at = text.find(block, end)
        else:
            at = text.find(block, at + 1)
    kept.append(text[start:])
    return "".join(kept)


def _read(path: Path, note: str, shown: str) -> str | None:
    """The file's text (None: no file, or bytes that do not hold `note`). MarkdownFileError
    when it holds the text but cannot be read as text to take it out."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise files.MarkdownFileError(f"{shown} cannot be read ({exc.strerror}), so the note in it cannot "
                                      "be removed") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if note.encode("utf-8") in raw:
            raise files.MarkdownFileError(f"{shown} still holds the text, and it is not UTF-8 text (byte "
                                          f"{exc.start}), so it is not rewritten") from None
        return None


def _taken_out(text: str, hermes: bool, note: str) -> str:
    """`text` without `note`'s entry: a whole Hermes entry, or the bullet `files.append`
    wrote; never a part of another entry."""
    if hermes:
        held = files.entries(text)
        kept = [entry for entry in held if entry != note]
        return files.SEPARATOR.join(kept) if len(kept) < len(held) else text
    return _without_block(text, _bullet(note))


def scrub_forgotten(folder: files.Folder, graph: Any, written: Iterable[tuple[str, str]]) -> Scrubbed:
    """`scrub` the entries forgotten memories wrote (`copies` of each, taken before the
    forget), except an entry a memory still in `graph` stands for too."""
    written = list(written)
    held = {(path, text) for path, text in written
            if any(other.content.strip() == text and (path, text) in copies(other) for other in graph.nodes.values())}
    return scrub(folder, [copy for copy in written if copy not in held])


def scrub(folder: files.Folder, wanted: Iterable[tuple[str, str]]) -> Scrubbed:
    """Take each (file, text) entry out of its file, under Hermes' lock, each file replaced
    atomically with its mode kept. Every file is read and checked before any is written, so
    a file that cannot be read (MarkdownFileError, naming it) leaves all of them as they were."""
    return _rewrite(folder, wanted, _taken_out)


def replace(folder: files.Folder, wanted: Iterable[tuple[str, str]], new: str) -> Scrubbed:
    """Put `new` in place of each (file, text) entry, where it stands (an edit of a memory
    whose text a markdown write made: Hermes reads the file into its own prompt, so the old
    text must not stay there). As `scrub`: every file read before any is written."""
    new = new.strip()
    return _rewrite(folder, wanted, lambda text, hermes, note: _swapped(text, hermes, note, new))


def _swapped(text: str, hermes: bool, note: str, new: str) -> str:
    """`text` with `note`'s entry replaced by `new` (never a part of another entry)."""
    if hermes:
        held = files.entries(text)
        return files.SEPARATOR.join(new if entry == note else entry for entry in held) if note in held else text
    return _without_block(text, _bullet(note), instead=_bullet(new))


def _rewrite(folder: files.Folder, wanted: Iterable[tuple[str, str]],
             change: Callable[[str, bool, str], str]) -> Scrubbed:
    by_file: dict[Path, tuple[str, list[str]]] = {}
    for given, text in wanted:
        path = folder.resolve(given, "memory_path")
        root = folder.root.resolve()
        shown = str(path.relative_to(root)) if root in path.parents else str(path)  # memories/MEMORY.md
        by_file.setdefault(path, (shown, []))[1].append(text)
    done = Scrubbed([], [])
    with contextlib.ExitStack() as locks:
        plans = []
        for path in sorted(by_file):  # one order for every forget: no two wait on each other
            shown, notes = by_file[path]
            locks.enter_context(files.locked(path))
            text = None
            for note in notes:
                text = _read(path, note, shown) if text is None else text
            if text is None:
                continue
            hermes = files.is_hermes_file(path, folder, text)
            new = text
            for note in notes:
                new = change(new, hermes, note)
            if new != text:
                plans.append((path, shown, new))
            if any(note in new for note in notes):
                done.inside_other_entries.append(shown)
        for path, shown, new in plans:
            try:
                write_atomically(path, new.encode("utf-8"), default_mode=0o600)  # an existing file keeps its mode
            except OSError as exc:
                raise files.MarkdownFileError(f"{shown} still holds the text: it cannot be rewritten "
                                              f"({exc.strerror or exc})") from None
            done.files.append(shown)
    return done
