"""The operator's tools for a soul file: `python -m soulgraph.store check|compact|export|backup|restore|repair|users|share|forget-user|flagged|release|consolidate`.

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
    users PATH             each user with memories in the soul (memory/scopes.py) and how many
    share PATH ID... --reason R
                           make these users' memories shared: every user of the agent sees them
    forget-user PATH platform:user --reason R [--markdown-dir D]
                           forget every memory of one user from every file (the right to be
                           forgotten), and their entries in MEMORY.md / USER.md; prints a report
    flagged PATH [--json]  the memories withheld from every prompt because they read like prompt
                           injection (memory/flagged.py), with their text: for a person at the shell
    consolidate PATH [--dry-run] [--below S]
                           upkeep for the whole soul (memory/upkeep.py): archive memories that
                           decayed below strength S (0.05) and were never confirmed, merge
                           duplicates; prints what it did (or, with --dry-run, would do)
    release PATH ID --reason R
                           an operator's decision that a flagged memory is a false alarm: the flag
                           is lifted (kept unpinned), the decision is an audit entry, and the
                           next save does not flag the same text again

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
    commands.add_parser("users", help="the users with memories in the soul, and how many each").add_argument(
        "path", type=Path)
    share_command = commands.add_parser("share", help="make users' memories shared (every user sees them)")
    share_command.add_argument("path", type=Path)
    share_command.add_argument("ids", nargs="+", help="node ids")
    share_command.add_argument("--reason", required=True, help="why: kept in the audit trail")
    forget_command = commands.add_parser("forget-user", help="forget every memory of one user, from every file")
    forget_command.add_argument("path", type=Path)
    forget_command.add_argument("scope", help="the user's scope, platform:user (see `users`)")
    forget_command.add_argument("--reason", default="forgotten at the user's request",
                                help="kept in the audit trail in place of the memories")
    forget_command.add_argument("--markdown-dir", type=Path,
                                help="where MEMORY.md / USER.md entries resolve (default: the soul file's folder)")
    flagged_command = commands.add_parser("flagged", help="the flagged memories, text included (operator only)")
    flagged_command.add_argument("path", type=Path)
    flagged_command.add_argument("--json", action="store_true", help="one JSON report instead of text")
    release_command = commands.add_parser("release", help="lift the flag of a memory that is a false alarm")
    release_command.add_argument("path", type=Path)
    release_command.add_argument("id", help="the memory's id (see `flagged`)")
    release_command.add_argument("--reason", required=True, help="why it is a false alarm: kept in the audit trail")
    upkeep_command = commands.add_parser("consolidate", help="archive decayed, never-confirmed memories and merge "
                                                            "duplicates (--dry-run: only say what would change)")
    upkeep_command.add_argument("path", type=Path)
    upkeep_command.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    upkeep_command.add_argument("--below", type=_strength, default=None,
                                help="archive below this effective strength (default 0.05)")
    args = parser.parse_args(argv)

    if args.command == "consolidate":
        return _upkeep_command(args)
    if args.command in ("users", "share", "forget-user"):
        return _users_command(args)
    if args.command in ("flagged", "release"):
        return _flagged_command(args)

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


def _users_command(args: argparse.Namespace) -> int:
    from soulgraph.memory import scopes, users
    from soulgraph.memory.guard import RefusedMemory

    soul = SoulFile(args.path)
    if not soul_exists(soul):
        print(f"soulgraph.store: no soul file at {soul.given_path}; nothing done", file=sys.stderr)
        return 1
    try:
        if args.command == "users":
            report = users.users(soul)
        elif args.command == "share":
            report = users.share(soul, args.ids, args.reason)
        else:
            report = users.forget_user(soul, args.scope, args.reason, args.markdown_dir)
    except (users.UsersError, scopes.ScopeError, SoulFileError, RefusedMemory) as exc:
        print(f"soulgraph.store: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report, indent=2, ensure_ascii=False))
    return 0


def _strength(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{value} is not between 0 and 1")
    return value


def _upkeep_command(args: argparse.Namespace) -> int:
    from soulgraph.memory import upkeep

    soul = SoulFile(args.path)
    if not soul_exists(soul):
        print(f"soulgraph.store: no soul file at {soul.given_path}; nothing done", file=sys.stderr)
        return 1
    below = upkeep.ARCHIVE_BELOW if args.below is None else args.below
    try:
        if args.dry_run:
            graph = soul.graph()
            planned = upkeep.plan(graph, below=below)
            report = {"soul_file": str(soul.path), "dry_run": True, **planned.report(graph)}
        else:
            with soul.change() as graph:
                planned = upkeep.plan(graph, below=below)
                report = {"soul_file": str(soul.path), "dry_run": False, **planned.report(graph)}
                report.update(upkeep.apply(graph, planned))
    except SoulFileError as exc:
        print(f"soulgraph.store: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report, indent=2, ensure_ascii=False))
    return 0


def _flagged_command(args: argparse.Namespace) -> int:
    from soulgraph.memory import flagged

    soul = SoulFile(args.path)
    if not soul_exists(soul):
        print(f"soulgraph.store: no soul file at {soul.given_path}; nothing done", file=sys.stderr)
        return 1
    try:
        if args.command == "flagged":
            found = flagged.listing(soul.graph())
            if args.json:
                print(json.dumps({"soul_file": str(soul.path), "flagged": found}, indent=2, ensure_ascii=False))
            else:
                sys.stdout.write(flagged.text_listing(str(soul.path), found))
            return 0
        report = flagged.release_in(soul, args.id, args.reason)
    except (flagged.FlaggedError, SoulFileError) as exc:
        print(f"soulgraph.store: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())

