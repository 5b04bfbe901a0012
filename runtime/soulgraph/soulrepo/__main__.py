"""`python -m soulgraph.soulrepo validate|export …`: the layered soul repository (seed 003).

    validate DIR [--json]                 every problem with its path; exit 1 on any
    export --hermes-home H OUT [--include SKILL …] [--agent-id ID] [--no-commit]
                                          a new repository from a Hermes home; JSON report
    import DIR [--hermes-home H] [--check] [--overwrite-identity] [--commit SHA] [--origin URL]
                                          into a Hermes home and its soul graph; JSON report
    bundle DIR --harness pi|codex|claude-code|zot|colibri [--soul-file PATH]
                                          what a harness gets: an identity prompt, or colibri's JSONL

Exit 0 when all is well, 1 on a problem, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys

from soulgraph.hermes.home import HermesHomeError
from soulgraph.soulrepo.bundle import HARNESSES, BundleError, bundle
from soulgraph.soulrepo.export import ExportError, export
from soulgraph.soulrepo.importer import import_soul
from soulgraph.soulrepo.validate import validate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m soulgraph.soulrepo", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("validate", help="check a layered soul repository")
    check.add_argument("repo")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    out = commands.add_parser("export", help="a layered soul repository from a Hermes home")
    out.add_argument("out", help="a new (or empty) folder")
    out.add_argument("--hermes-home", help="default: $HERMES_HOME, else ~/.hermes")
    out.add_argument("--include", action="append", default=[], metavar="SKILL",
                     help="export this skill (folder name) even without soul_export: true in its frontmatter")
    out.add_argument("--agent-id", help="the manifest's agent_id (default: the profile name, else hermes)")
    out.add_argument("--no-commit", action="store_true", help="do not make the folder a git repository")
    into = commands.add_parser("import", help="a layered soul into a Hermes home and its soul graph")
    into.add_argument("repo")
    into.add_argument("--hermes-home", help="default: $HERMES_HOME, else ~/.hermes (active_profile followed)")
    into.add_argument("--check", action="store_true", help="change nothing; report what would change, with diffs")
    into.add_argument("--overwrite-identity", action="store_true",
                      help="replace SOUL.md, USER.md, IDENTITY.md the home already has (a backup is kept)")
    into.add_argument("--commit", help="the commit the tree was checked out at (default: the checkout's HEAD)")
    into.add_argument("--origin", help="where the repository lives, recorded in provenance (default: its remote)")
    give = commands.add_parser("bundle", help="what a harness gets from a layered soul")
    give.add_argument("repo")
    give.add_argument("--harness", required=True, choices=HARNESSES)
    give.add_argument("--soul-file", help="leave out what this soul graph holds flagged (reads like prompt injection)")
    args = parser.parse_args(argv)
    if args.command == "bundle":
        try:
            sys.stdout.write(bundle(args.repo, args.harness, soul_file=args.soul_file))
        except BundleError as exc:
            print(f"soulrepo bundle: {exc}", file=sys.stderr)
            return 1
        return 0
    if args.command == "import":
        done = import_soul(args.repo, args.hermes_home, origin=args.origin, commit=args.commit,
                           overwrite_identity=args.overwrite_identity, check=args.check)
        print(json.dumps(done.as_dict(), indent=2, ensure_ascii=False))
        if args.check and done.diff:
            print(done.diff, file=sys.stderr, end="")
        return 1 if done.status == "error" else 0
    if args.command == "export":
        try:
            made = export(args.hermes_home, args.out, include=args.include, agent_id=args.agent_id,
                          commit=not args.no_commit)
        except (ExportError, HermesHomeError) as exc:
            print(f"soulrepo export: {exc}", file=sys.stderr)
            return 1
        print(json.dumps(made.as_dict(), indent=2))
        return 0 if not made.problems else 1
    report = validate(args.repo)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    elif report.ok:
        counts = ", ".join(f"{layer}: {len(files)}" for layer, files in sorted(report.files.items())) or "no imports"
        print(f"{args.repo}: a valid layered soul ({counts})")
    else:
        print(f"{args.repo}: {len(report.problems)} problem{'s' if len(report.problems) != 1 else ''}")
        for problem in report.problems:
            print(f"  {problem}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
