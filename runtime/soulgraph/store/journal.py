"""soul.json.journal: the changes made since soul.json was last written whole.

One line per record, each `<crc32 of the JSON, 8 hex digits> <JSON>\\n`. The first line is
the header `{"format": "soulgraph-journal", "schema": 1, "base_seq": S}`: the journal
continues the snapshot whose `seq` is S. Every later line is one acknowledged change,
`{"seq": S+1, "nodes": [...], "next_id": n, "branch": [...]?}` (see
`SoulGraph.pending`), numbered without gaps.

Reading stops at the first line that is incomplete or fails its checksum. An incomplete
last line (no newline) is a torn tail: a writer died while appending, so the record was
never acknowledged; it is counted and ignored, and the next writer cuts it off before
appending. A complete line that does not verify is damage, wherever it is: a record is
written in one go ending with its newline, so a whole line with a bad checksum was once
sound (and may have been acknowledged); the journal is refused, never cut.
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

JOURNAL_FORMAT = "soulgraph-journal"
JOURNAL_SCHEMA = 1


class JournalError(ValueError):
    """The journal cannot be used as it is; the message says what is wrong."""


def encode_line(record: dict[str, Any]) -> bytes:
    body = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return b"%08x %s\n" % (zlib.crc32(body), body)


def header_line(base_seq: int) -> bytes:
    return encode_line({"format": JOURNAL_FORMAT, "schema": JOURNAL_SCHEMA, "base_seq": base_seq})


def decode_line(line: bytes) -> dict[str, Any] | None:
    """The record on one complete line (without its newline), or None if it is not sound."""
    if len(line) < 10 or line[8:9] != b" ":
        return None
    try:
        crc = int(line[:8], 16)
    except ValueError:
        return None
    body = line[9:]
    if zlib.crc32(body) != crc:
        return None
    try:
        record = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) else None


@dataclass
class Scan:
    """What a read of journal bytes found."""

    records: list[dict[str, Any]] = field(default_factory=list)
    consumed: int = 0  # bytes up to the end of the last sound line
    torn_tail_bytes: int = 0  # bytes after it with no newline: a record not (yet) whole
    damaged_at: int | None = None  # offset of a complete line that does not verify

    def damage(self, offset: int = 0) -> str:
        """The problem, in the words an error gives it."""
        return (f"damaged record at byte {offset + (self.damaged_at or 0)} (a complete line whose checksum "
                "or JSON does not verify)")


def scan(data: bytes, start: int = 0) -> Scan:
    """Sound records in `data[start:]`, stopping at the first complete line that is not
    sound (damage) or at an incomplete last line (a torn tail)."""
    result = Scan(consumed=start)
    position = start
    while True:
        end = data.find(b"\n", position)
        if end < 0:
            break
        record = decode_line(data[position:end])
        if record is None:
            result.damaged_at = position
            break
        result.records.append(record)
        position = end + 1
        result.consumed = position
    result.torn_tail_bytes = 0 if result.damaged_at is not None else len(data) - result.consumed
    return result


def parse_header(record: dict[str, Any], path: Path) -> int:
    """The base seq of a journal whose first record is `record`."""
    if record.get("format") != JOURNAL_FORMAT:
        raise JournalError(f"{path}: first line is not a soulgraph journal header")
    schema = record.get("schema")
    if type(schema) is not int or schema > JOURNAL_SCHEMA:
        raise JournalError(f"{path}: journal schema {schema!r} is not one this soulgraph reads ({JOURNAL_SCHEMA})")
    base = record.get("base_seq")
    if type(base) is not int or base < 0:
        raise JournalError(f"{path}: journal header has no valid base_seq ({base!r})")
    return base


def check_record(record: dict[str, Any], expected_seq: int, path: Path) -> None:
    """A change record must be next in line and shaped as `SoulGraph.pending` makes it."""
    seq = record.get("seq")
    if seq != expected_seq or type(seq) is not int:
        raise JournalError(f"{path}: record seq {seq!r} where {expected_seq} was next: records missing or out of order")
    if not isinstance(record.get("nodes"), list) or type(record.get("next_id")) is not int:
        raise JournalError(f"{path}: record {seq} is not a soul graph change")
    if "branch" in record and not isinstance(record["branch"], list):
        raise JournalError(f"{path}: record {seq} has a branch that is not a list")
    if "audit" in record and not (isinstance(record["audit"], list) and all(isinstance(e, dict) for e in record["audit"])):
        raise JournalError(f"{path}: record {seq} has an audit that is not a list of objects")


def write_new(path: Path, base_seq: int) -> None:
    """Start an empty journal after snapshot `base_seq`: written beside, fsynced, renamed
    over the old journal (whose records the snapshot already holds), folder fsynced."""
    from soulgraph.store.atomic import write_atomically

    write_atomically(path, header_line(base_seq), mode=0o600)


def append(fd: int, line: bytes) -> None:
    """Write one record and make it durable before the change is acknowledged."""
    view = memoryview(line)
    while view:
        view = view[os.write(fd, view):]
    os.fdatasync(fd)
