"""Where a Hermes home is, and how to read the text files in it without crashing.

Facts read off hermes-agent 0.19:
- The home is `$HERMES_HOME`, else `~/.hermes`.
- A root holding an `active_profile` file (one line: a profile name) sends the CLI to
  `<root>/profiles/<name>`; an empty file or `default` means the root itself. A home
  that already sits in a `profiles/` folder is a profile home and is not redirected.
- Profile names match `[a-z0-9][a-z0-9_-]{0,63}`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

PROFILE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


class HermesHomeError(Exception):
    """The Hermes home cannot be used; the message says why."""


@dataclass(frozen=True)
class HermesHome:
    path: Path  # the home to work in (a profile home when redirected)
    root: Path  # the home as asked for, before any active_profile redirect
    profile: str | None  # the profile name when active_profile redirected us


def default_home(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    value = (env.get("HERMES_HOME") or "").strip()
    if value:
        return Path(value).expanduser()
    return Path(env.get("HOME") or Path.home()) / ".hermes"


def resolve_home(hermes_home: str | os.PathLike[str] | None = None,
                 environ: dict[str, str] | None = None) -> HermesHome:
    """The home to install into: `hermes_home` (else $HERMES_HOME, else ~/.hermes),
    followed through an `active_profile` redirect the way the Hermes CLI does."""
    root = Path(hermes_home).expanduser() if hermes_home else default_home(environ)
    root = root.absolute()
    if root.parent.name == "profiles":
        return HermesHome(root, root, root.name)  # already a profile home
    marker = root / "active_profile"
    try:
        name = marker.read_text(encoding="utf-8").strip() if marker.is_file() else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise HermesHomeError(f"{marker}: cannot be read ({exc})") from None
    if not name or name.casefold() == "default":
        return HermesHome(root, root, None)
    name = name.lower()
    if not PROFILE_NAME.match(name):
        raise HermesHomeError(f"{marker}: {name!r} is not a valid Hermes profile name")
    profile_home = root / "profiles" / name
    if not profile_home.is_dir():
        raise HermesHomeError(
            f"{marker} selects profile {name!r}, but {profile_home} does not exist"
        )
    return HermesHome(profile_home, root, name)


@dataclass(frozen=True)
class TextFile:
    text: str | None  # None when the file could not be used
    warning: str | None  # why it could not be used, or how it was read


def read_text_leniently(path: Path, label: str) -> TextFile:
    """Read a user-edited text file: UTF-8 (with or without a BOM), else Latin-1 with
    a warning. Missing, empty, binary or unreadable files give a warning, never raise."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return TextFile(None, f"{label}: not found, nothing seeded from it")
    except IsADirectoryError:
        return TextFile(None, f"{label}: is a directory, skipped")
    except OSError as exc:
        return TextFile(None, f"{label}: cannot be read ({exc.strerror}), skipped")
    if b"\x00" in raw[:8192]:
        return TextFile(None, f"{label}: looks binary (NUL bytes), skipped")
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]  # a BOM from a Windows editor: data is still UTF-8
    try:
        text, warning = raw.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        # Latin-1 decodes any byte sequence, so the entries survive; a few
        # characters may be wrong, which the warning says.
        text = raw.decode("latin-1")
        warning = f"{label}: not valid UTF-8 (byte {exc.start}); read as Latin-1, check its accents"
    if not text.strip():
        return TextFile(None, f"{label}: empty, nothing seeded from it")
    return TextFile(text, warning)
