"""`python -m soulgraph.memories`: see and correct what an agent remembers, at a shell.

    list                    memories, newest first (filters: --kind --scope --tag --status
                            --all --since --until --pinned --unpinned --flagged; --order)
    search QUERY            what the agent's recall finds (--as platform:user: as that user's
                            server would; the filters of `list` narrow it)
    show ID                 one memory: text, kind, scope, provenance, strength, links, history
    history [ID]            the audit trail: one memory's, or the latest changes of all
    edit ID                 a corrected version (--content, --kind, --tags; no option: $EDITOR)
    supersede ID --by ID2   another memory, already right, replaces this one
    pin ID / unpin ID       an axiom, or an ordinary memory again
    archive ID / unarchive ID
    forget ID --reason R    out of recall (archived); --hard: gone from every file (asks first)
    users                   each user with memories, and how many
    share ID... --reason R  users' memories made shared (every user sees them)
    forget-user SCOPE       every memory of one user, from every file (asks first)
    flagged                 the memories withheld as prompt injection, text included
    release ID --reason R   lift a false alarm's flag
    consolidate             archive decayed memories, merge duplicates (--dry-run)
    serve                   a local web page over the same (--port, --bind, --allow-edits)

Every command works on a Hermes home's soul (--hermes-home, else $HERMES_HOME, else ~/.hermes;
its active profile's) or on a soul file (--soul-file); --json prints one JSON document. Every
change is one change of the store under the writers' lock, so the gateway and its servers may
keep running, and one audit entry (writer operator:soulgraph.memories). Exit 0 done, 1
refused (the message says why; nothing changed), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from soulgraph.engine import record
from soulgraph.engine.graph import SoulGraphError
from soulgraph.memories import changes, reading, shown, text
from soulgraph.memories.reading import Filters
from soulgraph.memories.target import MemoriesError, Target, open_target
from soulgraph.memory import filters as time_filters
from soulgraph.memory import flagged, lifecycle, scopes
from soulgraph.store import SoulFileError

PROG = "python -m soulgraph.memories"
EDITOR_SECONDS = 3600  # an editor left open longer than this is given up on; nothing changes


def _time(name: str):
    def parse(value: str) -> float:
        try:
            return time_filters.parse_time(value, name)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse


def _strength(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not 0.0 <= number <= 1.0:
        raise argparse.ArgumentTypeError(f"{number} is not between 0 and 1")
    return number


def _common(suppress: bool) -> argparse.ArgumentParser:
    """The options every command takes, before or after its name."""
    default = argparse.SUPPRESS if suppress else None
    common = argparse.ArgumentParser(add_help=False)
    where = common.add_mutually_exclusive_group()
    where.add_argument("--hermes-home", default=default, metavar="H",
                       help="the Hermes home whose soul.json to use (default: $HERMES_HOME, else ~/.hermes)")
    where.add_argument("--soul-file", default=default, metavar="F", help="a soul file instead (soul.json or a backup)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS if suppress else False,
                        help="one JSON document instead of text")
    common.add_argument("--show-flagged", action="store_true", default=argparse.SUPPRESS if suppress else False,
                        help="show the text of memories flagged as prompt injection (an operator's own look)")
    return common


def _filters(command: argparse.ArgumentParser) -> None:
    group = command.add_argument_group("filters")
    group.add_argument("--kind", action="append", default=[], choices=record.KINDS, help="only this kind (repeatable)")
    group.add_argument("--scope", action="append", default=[], type=scopes.argument,
                       help="only this scope: 'shared' or platform:user (repeatable)")
    group.add_argument("--tag", action="append", default=[], help="only memories with this tag (repeatable: all of them)")
    group.add_argument("--status", action="append", default=[], choices=record.STATUSES,
                       help="only this status (default: active, what recall serves)")
    group.add_argument("--all", dest="any_status", action="store_true",
                       help="every status: superseded, contradicted and archived memories too")
    group.add_argument("--since", type=_time("--since"), help="written at or after this ISO 8601 date/time (UTC)")
    group.add_argument("--until", type=_time("--until"), help="written before this ISO 8601 date/time")
    pins = group.add_mutually_exclusive_group()
    pins.add_argument("--pinned", dest="pinned", action="store_const", const=True, help="only pinned ones")
    pins.add_argument("--unpinned", dest="pinned", action="store_const", const=False, help="only unpinned ones")
    group.add_argument("--flagged", dest="flagged", action="store_const", const=True, default=None,
                       help="only those flagged as prompt injection")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog=PROG, parents=[_common(False)], description=__doc__.split("\n\n")[0],
                                  formatter_class=argparse.RawDescriptionHelpFormatter,
                                  epilog=__doc__.split("\n\n", 1)[1])
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = _common(True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common], help=help, description=help)

    listing = command("list", "memories, newest first")
    _filters(listing)
    listing.add_argument("--order", choices=reading.ORDERS, default="newest", help="newest (default), oldest or hot")
    listing.add_argument("--limit", type=int, default=50, help="at most this many (0: all; default 50)")
    search = command("search", "what the agent's recall finds for QUERY")
    search.add_argument("query")
    _filters(search)
    search.add_argument("--as", dest="as_scope", type=scopes.argument, metavar="SCOPE",
                        help="as a server serving this user finds it (shared memories and theirs); default: every user's")
    search.add_argument("--limit", type=int, default=10, help="at most this many (default 10)")
    search.add_argument("--no-vectors", action="store_true", help="words only, even where the vectors are there")
    command("show", "one memory in full").add_argument("id")
    history = command("history", "the audit trail: one memory's, or the latest of all")
    history.add_argument("id", nargs="?")
    history.add_argument("--action", action="append", default=[], choices=lifecycle.ACTIONS, help="only these actions")
    history.add_argument("--scope", type=scopes.argument, help="only entries about this scope's memories")
    history.add_argument("--limit", type=int, default=50, help="the latest this many (0: all; default 50)")
    edit = command("edit", "a corrected version of a memory (the old one is kept, superseded)")
    edit.add_argument("id")
    edit.add_argument("--content", help="the new text ('-': read it from stdin)")
    edit.add_argument("--kind", choices=record.KINDS)
    edit.add_argument("--tags", help="the new tags, comma-separated ('' for none)")
    edit.add_argument("--reason", default="", help="why, kept in the audit trail")
    supersede = command("supersede", "another memory that is already right replaces this one")
    supersede.add_argument("id")
    supersede.add_argument("--by", required=True, metavar="ID2", help="the memory that replaces it")
    supersede.add_argument("--reason", default="", help="why, kept in the audit trail")
    for name, help in (("pin", "pin a memory: an axiom, never fading, first in every prime"),
                       ("unpin", "an ordinary memory again"),
                       ("archive", "out of recall and prompts, kept and searchable"),
                       ("unarchive", "an archived memory back in recall")):
        one = command(name, help)
        one.add_argument("id")
        one.add_argument("--reason", default="", help="why, kept in the audit trail")
    forget = command("forget", "out of recall; with --hard, gone from every file")
    forget.add_argument("id")
    forget.add_argument("--reason", required=True, help="why it must go: kept in the audit trail")
    forget.add_argument("--hard", action="store_true", help="remove it from soul.json, the journal, the store's "
                        "copies and the markdown files, for good")
    forget.add_argument("--yes", action="store_true", help="do not ask")
    command("users", "each user with memories in the soul, and how many")
    share = command("share", "make users' memories shared: every user sees them")
    share.add_argument("ids", nargs="+", metavar="ID")
    share.add_argument("--reason", required=True, help="why: kept in the audit trail")
    forget_user = command("forget-user", "forget every memory of one user, from every file")
    forget_user.add_argument("user", metavar="SCOPE", help="the user's scope, platform:user (see `users`)")
    forget_user.add_argument("--reason", default="forgotten at the user's request",
                             help="kept in the audit trail in place of the memories")
    forget_user.add_argument("--yes", action="store_true", help="do not ask")
    command("flagged", "the memories withheld as prompt injection, with their text (operator only)")
    release = command("release", "lift the flag of a memory that is a false alarm")
    release.add_argument("id")
    release.add_argument("--reason", required=True, help="why it is a false alarm: kept in the audit trail")
    upkeep = command("consolidate", "archive decayed, never-confirmed memories and merge duplicates")
    upkeep.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    upkeep.add_argument("--below", type=_strength, default=None, help="archive below this strength (default 0.05)")
    serve = command("serve", "a local web page to browse, search and correct the memories (docs/memories.md)")
    serve.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    serve.add_argument("--bind", metavar="ADDR", help="listen on this address instead of 127.0.0.1 (a warning says so)")
    serve.add_argument("--allow-edits", action="store_true", help="allow edit, pin, archive and forget from the page")
    serve.add_argument("--tunnel-port", type=int, metavar="N", help="also answer to 127.0.0.1:N and localhost:N, "
                       "the local end of an SSH tunnel to this server (fleet memories HOST --web)")
    return top


def _filters_of(args: argparse.Namespace) -> Filters:
    return Filters(kinds=tuple(args.kind), scopes=tuple(args.scope), tags=tuple(args.tag),
                   statuses=tuple(args.status), any_status=args.any_status, since=args.since, until=args.until,
                   pinned=args.pinned, flagged=args.flagged)


def _confirm(args: argparse.Namespace, question: str) -> None:
    if getattr(args, "yes", False):
        return
    if not sys.stdin.isatty():
        raise MemoriesError(f"{question.rstrip('?')}: refused without --yes (there is no terminal to ask on); "
                            "nothing changed")
    answer = input(f"{question} [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        raise MemoriesError("not confirmed; nothing changed")


def _edited_text(target: Target, node_id: str) -> str:
    """The memory's text, edited in $VISUAL / $EDITOR (vi): for a person at a terminal."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise MemoriesError("edit needs --content, --kind or --tags when there is no terminal for an editor; "
                            "nothing changed")
    node = reading.get(target.soul.graph(), node_id)
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.TemporaryDirectory(prefix="soul-edit-") as folder:
        path = Path(folder) / f"{node_id}.txt"
        path.write_text(node.content + "\n", encoding="utf-8")
        try:
            done = subprocess.run([*shlex.split(editor), str(path)], timeout=EDITOR_SECONDS)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise MemoriesError(f"the editor {editor!r} failed ({exc}); nothing changed") from None
        if done.returncode != 0:
            raise MemoriesError(f"the editor {editor!r} exited {done.returncode}; nothing changed")
        return path.read_text(encoding="utf-8")


def _vectors(target: Target, args: argparse.Namespace):
    """The soul's vectors for a question, when their file is there (loading it is quick;
    building one is the server's job, in the background)."""
    if args.no_vectors:
        return None
    from soulgraph.store.vectors import VectorStore, vectors_path  # numpy, when the vectors are there
    path = vectors_path(target.soul.path)
    return VectorStore(path, background=False) if path.exists() else None


def run(args: argparse.Namespace) -> tuple[Any, str]:
    """The command's JSON answer and its text."""
    target = open_target(args.hermes_home, args.soul_file)
    soul, show_flagged = target.soul, args.show_flagged
    name = args.command
    if name in ("list", "search", "show", "history", "users", "flagged"):
        graph = soul.graph()
    if name == "list":
        nodes, total = reading.listing(graph, _filters_of(args), limit=args.limit or None, order=args.order)
        items = [shown.brief(graph, n, show_flagged=show_flagged) for n in nodes]
        return {"soul_file": str(soul.path), "total": total, "memories": items}, text.memory_list(items, total)
    if name == "search":
        vectors = _vectors(target, args)
        hits = reading.search(graph, args.query, _filters_of(args), limit=args.limit, as_scope=args.as_scope,
                              vectors=vectors)
        items = [shown.brief(graph, h.node, show_flagged=show_flagged, score=round(h.score, 4), via=h.via)
                 for h in hits]
        used = bool(vectors is not None and vectors.state != "lexical")
        return ({"soul_file": str(soul.path), "query": args.query, "vectors": used, "results": items},
                text.memory_list(items, what="memories found"))
    if name == "show":
        item = shown.detail(graph, reading.get(graph, args.id), show_flagged=show_flagged)
        return item, text.memory_block(item)
    if name == "history":
        entries = reading.history(graph, args.id, limit=args.limit or None, actions=tuple(args.action),
                                  scope=args.scope)
        entries = [shown.entry_shown(graph, e, show_flagged) for e in entries]
        return {"soul_file": str(soul.path), "node": args.id, "entries": entries}, text.history(entries)
    if name == "edit":
        content = args.content
        if content == "-":
            content = sys.stdin.read()
        if content is None and args.kind is None and args.tags is None:
            content = _edited_text(target, args.id)
        tags = None if args.tags is None else [t.strip() for t in args.tags.split(",") if t.strip()]
        report = changes.edit(target, args.id, content=content, kind=args.kind, tags=tags, reason=args.reason)
        return report, text.change(report)
    if name == "supersede":
        report = changes.supersede(target, args.id, args.by, reason=args.reason)
        return report, text.change(report)
    if name in ("pin", "unpin"):
        report = changes.pin(target, args.id, name == "pin", reason=args.reason)
        return report, text.change(report)
    if name in ("archive", "unarchive"):
        report = getattr(changes, name)(target, args.id, reason=args.reason)
        return report, text.change(report)
    if name == "forget":
        if args.hard:
            _confirm(args, f"Forget {args.id} for good, from every file of {soul.path.parent}?")
        report = changes.forget(target, args.id, reason=args.reason, hard=args.hard)
        return report, text.change(report)
    return _operator(name, args, target)


def _operator(name: str, args: argparse.Namespace, target: Target) -> tuple[Any, str]:
    """The commands over a whole soul's users, flags and upkeep (memory/users.py, flagged.py, upkeep.py)."""
    from soulgraph.memory import upkeep, users

    soul = target.soul
    if name == "flagged":
        found = flagged.listing(soul.graph())
        return {"soul_file": str(soul.path), "flagged": found}, flagged.text_listing(str(soul.path), found)
    if name == "users":
        report = users.users(soul)
    elif name == "share":
        report = users.share(soul, args.ids, args.reason)
    elif name == "forget-user":
        _confirm(args, f"Forget every memory of {args.user}, from every file of {soul.path.parent}?")
        report = users.forget_user(soul, args.user, args.reason, target.folder.root)
    elif name == "release":
        report = flagged.release_in(soul, args.id, args.reason)
    else:
        below = upkeep.ARCHIVE_BELOW if args.below is None else args.below
        if args.dry_run:
            graph = soul.graph()
            report = {"soul_file": str(soul.path), "dry_run": True, **upkeep.plan(graph, below=below).report(graph)}
        else:
            with soul.change() as graph:
                planned = upkeep.plan(graph, below=below)
                report = {"soul_file": str(soul.path), "dry_run": False, **planned.report(graph)}
                report.update(upkeep.apply(graph, planned))
    return report, json.dumps(report, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "serve":
        from soulgraph.memories.web.app import main as serve
        return serve(args)
    from soulgraph.memory import scopes as scope_errors, users, flagged as flag_errors
    from soulgraph.memory.guard import RefusedMemory

    try:
        answer, shown_text = run(args)
    except (MemoriesError, SoulFileError, SoulGraphError, RefusedMemory, users.UsersError,
            scope_errors.ScopeError, flag_errors.FlaggedError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps(answer, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(shown_text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
