"""The operator's tools for a soul file: `python -m soulgraph.store check|compact|export|backup|restore|repair`.

    check PATH             read soul.json and its journal without writing anything; print
                           one JSON report (counts, the journal's records, the last good
                           record, any torn tail); exit 0 when they agree, 1 when not (a
                           backup is a soul.json without a journal: check reads it too)
    compact PATH           fold the journal into a fresh soul.json now (takes the write lock)
    export PATH [--out F]  the whole graph, journal included, as one JSON document
                           (soul.json's own format) on stdout or in F
    backup SOUL DEST [--force]
                           a consistent, verified copy while servers keep writing: one
                           snapshot with the journal folded in, mode 0600, at DEST (a file,
                           or a folder: a timestamped name inside it); see backup.py
    restore BACKUP SOUL [--force]
                           put a backup's graph in place of SOUL; a soul that holds memories
                           is replaced only with --force, and is kept as a backup first
    repair PATH            mend a soul.json that names nodes it no longer holds (what two
                           forget bugs of older versions wrote): drop exactly those edges,
                           keeping the damaged file beside it first; see repair.py

A person's view of the memories themselves (list, search, show, edit, pin, forget, and the
users, share, forget-user, flagged, release and consolidate commands this tool had) is
`python -m soulgraph.memories`.

A path where neither soul.json nor its journal exists is refused by every command (a typo
must not read as an empty soul, nor create one).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from soulgraph.store import snapshot
from soulgraph.store.atomic import write_atomically
from soulgraph.store.backup import BackupError, backup, restore, soul_exists
from soulgraph.store.repair import RepairError, repair
from soulgraph.store.soulfile import SoulFile, SoulFileError


MOVED = ("users", "share", "forget-user", "flagged", "release", "consolidate")  # to soulgraph.memories


def check(path: Path) -> dict[str, Any]:
    soul = SoulFile(path)
    report: dict[str, Any] = {"soul_file": str(soul.path), "ok": False}
    if soul.path != soul.given_path:
        report["symlink"] = str(soul.given_path)
    if not soul_exists(soul):
        report["problem"] = f"no soul file at {soul.given_path} (neither it nor {soul.journal_path.name} exists)"
        return report
    try:
        graph = soul.graph()
    except SoulFileError as exc:
        report["problem"] = str(exc)
        return report
    journal_exists = soul.journal_path.exists()
    follows = journal_exists and soul._journal_base == soul._snapshot_seq
    report.update({
        "ok": True,
        "schema": soul._schema,
        "snapshot_seq": soul._snapshot_seq,
        "snapshot_bytes": soul._snapshot_size,
        "nodes": len(graph),
        "edges": sum(len(kids) for kids in graph.children.values()),
        "pinned": len(graph.pinned),
        "hypotheses": len(graph.branch),
        "journal": {
            "path": str(soul.journal_path),
            "exists": journal_exists,
            "base_seq": soul._journal_base if journal_exists else None,
            "records": soul.seq - soul._snapshot_seq if follows else 0,
            "bytes": soul._journal_offset,
            "torn_tail_bytes": soul.torn_tail_bytes,
        },
        "last_good_seq": soul.seq,
    })
    if journal_exists and not follows:
        report["journal"]["note"] = "older than soul.json (an interrupted compaction): the next write replaces it"
    if soul._schema is not None and soul._schema < snapshot.SCHEMA:
        report["note"] = f"schema {soul._schema}: rewritten as schema {snapshot.SCHEMA} on the next write (a backup is kept)"
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m soulgraph.store", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("check", help="read and verify, write nothing").add_argument("path", type=Path)
    commands.add_parser("compact", help="fold the journal into soul.json").add_argument("path", type=Path)
    export = commands.add_parser("export", help="the whole graph as one JSON document")
    export.add_argument("path", type=Path)
    export.add_argument("--out", type=Path, help="write here (atomically, mode 0600) instead of stdout")
    backup_command = commands.add_parser("backup", help="a consistent, verified copy of a live soul file")
    backup_command.add_argument("soul", type=Path, help="the soul file (soul.json)")
    backup_command.add_argument("dest", help="the backup file, or a folder to put a timestamped one in")
    backup_command.add_argument("--force", action="store_true", help="replace DEST if it is an existing file")
    restore_command = commands.add_parser("restore", help="put a backup in place of a soul file")
    restore_command.add_argument("backup", type=Path, help="the backup (or any soul file)")
    restore_command.add_argument("soul", type=Path, help="the soul file to replace")
    restore_command.add_argument("--force", action="store_true",
                                 help="replace a soul that holds memories (it is kept as a backup beside it first)")
    commands.add_parser("repair", help="drop edges to nodes that are gone, so the soul loads again").add_argument(
        "path", type=Path)
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in MOVED:
        print(f"soulgraph.store: `{argv[0]}` is a command of python -m soulgraph.memories now: "
              f"python -m soulgraph.memories {argv[0]} --soul-file PATH ...", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)

    if args.command == "check":
        report = check(args.path)
        print(json.dumps(report, indent=2))
        return 0 if report["ok"] else 1
    if args.command in ("backup", "restore", "repair"):
        try:
            if args.command == "backup":
                report = backup(args.soul, args.dest, force=args.force)
            elif args.command == "restore":
                report = restore(args.backup, args.soul, force=args.force)
            elif not soul_exists(SoulFile(args.path)):
                raise RepairError(f"no soul file at {args.path}; nothing done")
            else:
                report = repair(args.path)
        except (BackupError, RepairError) as exc:
            print(f"soulgraph.store: {exc}", file=sys.stderr)
            return 1
        print(json.dumps(report, indent=2))
        return 0
    soul = SoulFile(args.path)
    if not soul_exists(soul):
        print(f"soulgraph.store: no soul file at {soul.given_path} (neither it nor {soul.journal_path.name} "
              "exists); nothing done", file=sys.stderr)
        return 1
    try:
        if args.command == "compact":
            soul.graph()  # a file that cannot be read is refused before the lock file is made
            soul.compact()
            print(json.dumps({"soul_file": str(soul.path), "ok": True, "seq": soul.seq,
                              "snapshot_bytes": soul._snapshot_size, "warnings": soul.warnings}, indent=2))
            return 0
        graph = soul.graph()
        data = snapshot.encode(graph, soul.seq, soul.clock(), {})
    except SoulFileError as exc:
        print(f"soulgraph.store: {exc}", file=sys.stderr)
        return 1
    if args.out:
        try:
            write_atomically(args.out.absolute(), data, mode=0o600)
        except OSError as exc:
            print(f"soulgraph.store: {args.out}: cannot be written ({exc.strerror or exc})", file=sys.stderr)
            return 1
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

