"""Does a module's record of its last run still hold? Then running it again would change nothing.

The Hermes installer leaves such a record (runtime/soulgraph/hermes/install_record.py has the
format): the argv it ran with, and a reading (inode, size, mtime, mode, owner) of every file it
manages, or only whether the file exists. One shell command prints the record and the same
readings taken now; the run is skipped only when the argv is the one we would run and every
reading is unchanged. Anything else (no record, an unreadable one, a file touched since, another
release's python in the argv) means: run it.
"""

from __future__ import annotations

import json

from fleet.facts import file_reading_command, sh_path
from fleet.operations.base import Context

NOW = "::soulfleet-record-now::"

# For each line of the record after the first, the reading taken now, one line each.
READ_NOW = f"""
tail -n +2 "$r" | while IFS="$(printf '\\t')" read -r kind path _; do
  case $kind in
    stat) {file_reading_command('"$path"')} ;;
    exists) if [ -e "$path" ]; then echo yes; else echo no; fi ;;
    *) echo "?" ;;
  esac
done
"""


def read_command(record: str) -> str:
    return f"r={sh_path(record)}; [ -f \"$r\" ] || exit 3; cat \"$r\"; echo '{NOW}';{READ_NOW}"


def holds(output: str, argv: list[str]) -> bool:
    """`output` of read_command: the record, then the readings now."""
    recorded, marker, now = output.partition(NOW + "\n")
    if not marker:
        return False
    lines = recorded.rstrip("\n").split("\n")
    if not lines or lines[0] != f"args\t{json.dumps(argv)}":
        return False
    entries = [line.split("\t") for line in lines[1:]]
    readings = now.rstrip("\n").split("\n") if now.strip() else []
    if len(entries) != len(readings) or any(len(entry) != 3 for entry in entries):
        return False
    return all(entry[2] == reading for entry, reading in zip(entries, readings))


def record_holds(ctx: Context, record: str, argv: list[str]) -> bool:
    result = ctx.read(read_command(record))
    return result.ok and holds(result.stdout, argv)
