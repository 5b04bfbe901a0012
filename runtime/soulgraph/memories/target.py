"""Which soul a person works on: a Hermes home's (its active profile's), or a soul file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from soulgraph.hermes.home import HermesHomeError, resolve_home
from soulgraph.memory import markdown_files as files
from soulgraph.store import SoulFile


class MemoriesError(Exception):
    """A refused command: the message names the problem and says that nothing changed."""


@dataclass(frozen=True)
class Target:
    soul: SoulFile
    folder: files.Folder  # where the markdown files a memory was copied to resolve (the Hermes home)


def open_target(hermes_home: str | Path | None = None, soul_file: str | Path | None = None) -> Target:
    """The soul of `soul_file`, else of the Hermes home (`hermes_home`, else $HERMES_HOME,
    else ~/.hermes; an active profile's home when it names one). A path where neither
    soul.json nor its journal exists is refused: a typo must not read as an empty soul."""
    if soul_file is not None and hermes_home is not None:
        raise MemoriesError("give --hermes-home or --soul-file, not both")
    if soul_file is not None:
        path = Path(soul_file).expanduser()
    else:
        try:
            path = resolve_home(hermes_home).path / "soul.json"
        except HermesHomeError as exc:
            raise MemoriesError(str(exc)) from None
    soul = SoulFile(path)
    if not (soul.path.exists() or soul.journal_path.exists()):
        raise MemoriesError(f"no soul file at {soul.given_path} (neither it nor {soul.journal_path.name} exists)")
    return Target(soul, files.Folder(soul.path.parent))
