"""SOUL.md and MEMORY.md on disk: where they are, what they hold, adding to them safely.

For the markdown toolset (seed 001). Two formats:

- Hermes' memory files (`memories/MEMORY.md`, `memories/USER.md` in a Hermes home, or any file
  already holding Hermes' separator): entries joined by a line holding only `§`, no trailing
  newline, and a character budget on the joined text (2,200 and 1,375 by default; Hermes'
  `memory.memory_char_limit` / `memory.user_char_limit`). Hermes locks `<file>.lock` with
  flock and replaces the file atomically; so do we, so neither loses the other's entry.
- Any other markdown file: an entry is appended as a bullet.

Paths: a relative path resolves against the folder the server was given (the Hermes home by
default), never the working directory. A path outside it, or a symlink leading out of it, is
refused unless the operator allowed it (`--allow-outside-soul-dir`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from soulgraph.store.atomic import write_atomically

SEPARATOR = "\n§\n"
HERMES_BUDGETS = {"MEMORY.md": 2200, "USER.md": 1375}
DEFAULT_SOUL = "# {name}\n\n{description}\n"
DEFAULT_MEMORY = "# Memory\n"
LOCK_TIMEOUT = 10.0  # seconds: Hermes holds the lock for one read-modify-write


class MarkdownFileError(ValueError):
    """A request on the markdown files that is refused; the message says why."""


@dataclass(frozen=True)
class Folder:
    """The folder relative paths resolve against, and whether paths may leave it."""

    root: Path
    allow_outside: bool = False

    @property
    def is_hermes_home(self) -> bool:
        return (self.root / "config.yaml").is_file()

    def resolve(self, given: str, what: str) -> Path:
        """`given` as an absolute path inside the folder; MarkdownFileError otherwise."""
        if not given or "\x00" in given:
            raise MarkdownFileError(f"{what}: an empty path")
        if self.is_hermes_home and given in HERMES_BUDGETS and not (self.root / given).exists():
            given = f"memories/{given}"  # where Hermes keeps MEMORY.md and USER.md
        path = Path(given).expanduser()
        path = path if path.is_absolute() else self.root / path
        lexical, real = Path(os.path.abspath(path)), Path(os.path.realpath(path))
        if not self.allow_outside:
            for candidate, root, word in ((lexical, Path(os.path.abspath(self.root)), "is"),
                                          (real, self.root.resolve(), "leads")):
                if candidate != root and root not in candidate.parents:
                    raise MarkdownFileError(
                        f"{what}: {given} {word} outside {self.root}; the server's operator can allow that "
                        "with --allow-outside-soul-dir")
        return real


def is_hermes_file(path: Path, folder: Folder, text: str | None = None) -> bool:
    if path.name in HERMES_BUDGETS and path.parent.name == "memories" and folder.is_hermes_home:
        return True
    return text is not None and SEPARATOR in text


def budget(path: Path, folder: Folder) -> int | None:
    """Hermes' character budget for this memory file (config.yaml may change the defaults)."""
    if path.name not in HERMES_BUDGETS:
        return None
    default = HERMES_BUDGETS[path.name]
    key = "memory_char_limit" if path.name == "MEMORY.md" else "user_char_limit"
    try:
        import yaml  # ruamel's pure reader would do; PyYAML is what the SDK already pulls in
    except ImportError:  # pragma: no cover
        return default
    try:
        data = yaml.safe_load((folder.root / "config.yaml").read_text(encoding="utf-8")) or {}
        value = (data.get("memory") or {}).get(key)
    except (OSError, ValueError, AttributeError, yaml.YAMLError):
        return default
    return int(value) if isinstance(value, int) and value > 0 else default


def read_text(path: Path, what: str) -> str | None:
    """The file's text, None when it does not exist; MarkdownFileError when unreadable."""
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise MarkdownFileError(f"{what}: {path} is a directory") from None
    except UnicodeDecodeError as exc:
        raise MarkdownFileError(f"{what}: {path} is not UTF-8 text (byte {exc.start}); left unchanged") from None
    except OSError as exc:
        raise MarkdownFileError(f"{what}: {path} cannot be read ({exc.strerror})") from None


def entries(text: str) -> list[str]:
    """Hermes' entries of a memory file's text."""
    return [e.strip() for e in text.split(SEPARATOR) if e.strip()] if text.strip() else []


def status(path: Path, folder: Folder, what: str) -> dict:
    text = read_text(path, what)
    info: dict = {"exists": text is not None, "size_bytes": len(text.encode("utf-8")) if text is not None else 0}
    if is_hermes_file(path, folder, text):
        held = entries(text or "")
        used = len(SEPARATOR.join(held))
        limit = budget(path, folder)
        info.update(format="hermes", entries=len(held), chars_used=used)
        if limit is not None:
            info.update(budget_chars=limit, remaining_chars=max(0, limit - used))
    else:
        info["format"] = "markdown"
    return info


def create(path: Path, text: str) -> bool:
    """Write `text` to a new file; False (and nothing written) when it exists already."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    return True


@contextlib.contextmanager
def locked(path: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hermes' lock for a memory file: flock on `<file>.lock`."""
    import time

    lock_path = path.with_name(path.name + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise MarkdownFileError(f"{path} is locked by another writer (more than {timeout:g} s)") from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)


@dataclass
class Appended:
    format: str  # hermes | markdown
    entries: int | None = None
    remaining_chars: int | None = None


def append(path: Path, folder: Folder, note: str, what: str = "memory_path") -> Appended:
    """Add `note` as a new entry, under the lock, replacing the file atomically. A Hermes file
    whose budget the entry would exceed is refused, the file unchanged."""
    note = note.strip()
    if not note:
        raise MarkdownFileError("note: empty")
    with locked(path):
        text = read_text(path, what)
        if is_hermes_file(path, folder, text):
            held = entries(text or "")
            if note in held:
                return Appended("hermes", len(held), _remaining(path, folder, held))
            new = held + [note]
            limit = budget(path, folder)
            used = len(SEPARATOR.join(new))
            if limit is not None and used > limit:
                raise MarkdownFileError(
                    f"{what}: {path.name} would hold {used:,} characters, over its budget of {limit:,} "
                    f"({limit - len(SEPARATOR.join(held)):,} left); shorten the note or remove an entry first; "
                    "file unchanged")
            write_atomically(path, SEPARATOR.join(new).encode("utf-8"), default_mode=0o600)
            return Appended("hermes", len(new), _remaining(path, folder, new))
        body = "\n".join(("- " if i == 0 else "  ") + line for i, line in enumerate(note.splitlines()))
        current = text or DEFAULT_MEMORY
        joined = current + ("" if current.endswith("\n") else "\n") + body + "\n"
        write_atomically(path, joined.encode("utf-8"), default_mode=0o600)
        return Appended("markdown")


def _remaining(path: Path, folder: Folder, held: list[str]) -> int | None:
    limit = budget(path, folder)
    return None if limit is None else max(0, limit - len(SEPARATOR.join(held)))
