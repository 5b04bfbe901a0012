"""`python -m soulgraph.soulrepo validate DIR [--json]`: is this a layered soul we can import?

Prints every problem with its path (or the report as JSON); exit 0 when there is none, 1 when
there is any, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys

from soulgraph.soulrepo.validate import validate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m soulgraph.soulrepo", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("validate", help="check a layered soul repository")
    check.add_argument("repo")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
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
