"""The installer's record of its last run, so a deploy that changes nothing need not start it.

Every fleet run starts the installer on every host, about 0.15 s of CPU each (a Python, ruamel,
the soul file read) to learn that nothing changed. After a run that ended without error, the
installer writes `<home>/.soulgraph/install-record`: the arguments it ran with and, for each
file it manages or reads, the file's inode, size, mtime, mode and owner (or only whether it
exists, for soul.json, which the agent rewrites all the time and the installer only creates).
The fleet's `module` operation (fleet/operations/module_record.py) reads it back with one shell
command and skips the run while the arguments and every one of those readings are the same.

Text, one line each, fields split by tabs:

    args	<the argv, as JSON>
    stat	<path>	<inode> <size> <mtime, seconds.nanoseconds> <mode, octal> <uid>   ("missing" when absent)
    exists	<path>	yes|no

The readings are written as GNU `stat -L -c '%i %s %.9Y %a %u'` (BSD: `-f '%i %z %Fm %Lp %u'`)
prints them, so the shell on the host can compare without a Python. Where a host's `stat` prints
them otherwise (a coreutils too old for `%.9Y`), the record never holds there and the
installer simply runs each time, as it did before the record.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from soulgraph.hermes import install_state
from soulgraph.hermes.plugin_files import plugin_dir
from soulgraph.hermes.skill import SKILL_RELPATH
from soulgraph.store.atomic import write_atomically

RECORD = "install-record"


def record_path(home: Path) -> Path:
    return install_state.state_dir(home) / RECORD


def reading(path: Path) -> str:
    """As `stat -L -c '%i %s %.9Y %a %u'` prints it; "missing" when there is no such file."""
    try:
        st = os.stat(path)
    except OSError:
        return "missing"
    seconds, nanoseconds = divmod(st.st_mtime_ns, 1_000_000_000)
    return f"{st.st_ino} {st.st_size} {seconds}.{nanoseconds:09d} {st.st_mode & 0o7777:o} {st.st_uid}"


def watched(home: Path) -> tuple[list[Path], list[Path]]:
    """(files whose readings must stay the same, files that must only keep existing or not)."""
    plugin = plugin_dir(home)
    skill = home / SKILL_RELPATH
    # Not skills/ itself: other skills come and go there (a layered soul imports its own), and
    # each would make the next deploy start the installer for nothing.
    stat = [home / "config.yaml", skill.parent, skill, plugin]
    if plugin.is_dir():
        stat += sorted(p for p in plugin.iterdir() if p.is_file())
    return stat, [home / "soul.json"]


def write(home: Path, argv: list[str]) -> None:
    """Record this run (call after a run that changed what it had to and reported no error)."""
    stat, exists = watched(home)
    paths = [str(p) for p in stat + exists]
    if any("\t" in p or "\n" in p for p in paths):
        return  # the record cannot hold such a path: no record, the installer simply runs each time
    lines = [f"args\t{json.dumps(argv)}"]
    lines += [f"stat\t{p}\t{reading(p)}" for p in stat]
    lines += [f"exists\t{p}\t{'yes' if p.exists() else 'no'}" for p in exists]
    text = ("\n".join(lines) + "\n").encode()
    try:
        if record_path(home).read_bytes() == text:
            return  # as it was: a run that changed nothing leaves the home as it found it
    except OSError:
        pass
    folder = install_state.state_dir(home)
    folder.mkdir(mode=0o700, exist_ok=True)
    write_atomically(record_path(home), text, mode=0o600)


def forget(home: Path) -> None:
    """No record: the next run of the installer is made in any case."""
    try:
        record_path(home).unlink()
    except FileNotFoundError:
        pass
