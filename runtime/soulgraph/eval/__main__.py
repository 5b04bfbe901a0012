"""Command line: ``python -m soulgraph.eval {ledger,locomo,supersede,provider,updates,synth} …``."""

from __future__ import annotations

import argparse
import json
import sys

from soulgraph.eval.ledger import read_ledger
from soulgraph.eval.locomo import read_locomo, replay_locomo
from soulgraph.eval.provider import USERS, compare as compare_provider, compare_text as provider_compare_text
from soulgraph.eval.provider import replay as replay_provider, revisions_text, text as provider_text
from soulgraph.eval.replay import replay_ledger
from soulgraph.eval.report import ledger_report, ledger_text, locomo_report, locomo_text
from soulgraph.eval.retrievers import DEFAULT_METHODS, METHODS, parse_methods
from soulgraph.eval.supersede import evaluate as evaluate_supersede, text as supersede_text
from soulgraph.eval.synthetic import synthetic_ledger
from soulgraph.eval import updates


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m soulgraph.eval", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    methods_help = f"comma list of methods (default {','.join(DEFAULT_METHODS)}; known: {','.join(METHODS)})"

    ledger = commands.add_parser("ledger", help="replay a task ledger and score built-on / waiting-on recall")
    ledger.add_argument("file")
    ledger.add_argument("--json", action="store_true", help="print the full results as JSON")
    ledger.add_argument("--project", help="replay only the tasks of this project")
    ledger.add_argument("--methods", help=methods_help)
    ledger.add_argument("--depth", type=int, default=10, help="ids asked of each method (default 10)")
    ledger.add_argument("--declared-at", choices=("meta", "created"), default="meta",
                        help="date a dependant's declaration by meta.dep_declared_at when present (default) "
                             "or always by the dependant's created_at")

    locomo = commands.add_parser("locomo", help="LoCoMo turn-level evidence recall")
    locomo.add_argument("file")
    locomo.add_argument("--json", action="store_true")
    locomo.add_argument("--methods", help=methods_help)

    supersede = commands.add_parser("supersede", help="does the current version rank above the one it replaced?")
    supersede.add_argument("file")
    supersede.add_argument("--json", action="store_true")

    provider = commands.add_parser("provider", help="LoCoMo through the Hermes memory provider: sync_turn in, prefetch out")
    provider.add_argument("file")
    provider.add_argument("--budget", type=int, default=1500, help="characters prefetch may inject (default 1500)")
    provider.add_argument("--limit", type=int, default=8, help="memories prefetch may inject (default 8)")
    provider.add_argument("--users", choices=(*USERS, "all"), default="alone",
                          help="alone: a soul per conversation (default); together: one soul, each conversation "
                               "its own user (scope locomo:<sample_id>); crowd: one soul, no scopes; "
                               "all: the three on the same questions, in one table")
    provider.add_argument("--revisions", action="store_true",
                          help="also list every change a later turn marked (old and new value, both texts)")

    update = commands.add_parser("updates", help="knowledge updates (BEAM): after a fact changed, is the current "
                                                 "value recalled and the old one marked?")
    update.add_argument("file")
    update.add_argument("--limit", type=int, default=10, help="memories recall shows per question (default 10)")
    update.add_argument("--records", type=int, help="only the first N records (a quick run)")
    update.add_argument("--lexical", action="store_true", help="recall without the static embedding model")
    update.add_argument("--json", action="store_true")

    synth = commands.add_parser("synth", help="write a synthetic ledger (for scale runs)")
    synth.add_argument("output")
    synth.add_argument("--tasks", type=int, default=50_000)
    synth.add_argument("--seed", type=int, default=1)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "synth":
            with open(args.output, "w", encoding="utf-8") as handle:
                json.dump(synthetic_ledger(args.tasks, seed=args.seed), handle)
            print(f"wrote {args.tasks:,} tasks to {args.output}")
            return 0
        if args.command == "supersede":
            report = evaluate_supersede(args.file)
            print(json.dumps(report, indent=2) if args.json else supersede_text(report))
            return 0
        if args.command == "updates":
            records = updates.read_updates(args.file)[: args.records]
            result = updates.replay(records, limit=args.limit, embed=not args.lexical)
            print(json.dumps(updates.to_json(args.file, result), indent=2) if args.json
                  else updates.text(args.file, result))
            return 0
        if args.command == "provider":
            data = read_locomo(args.file)
            if args.users == "all":
                print(provider_compare_text(args.file, compare_provider(data, budget=args.budget, limit=args.limit)))
            else:
                result = replay_provider(data, budget=args.budget, limit=args.limit, users=args.users)
                print(provider_text(args.file, result))
                if args.revisions:
                    print()
                    print(revisions_text(result))
            return 0
        methods = parse_methods(args.methods)
        if args.command == "ledger":
            ledger = read_ledger(args.file, project=args.project)
            result = replay_ledger(ledger, methods, depth=args.depth, use_declared_at=args.declared_at == "meta")
            report = ledger_report(ledger, result)
            text = ledger_text
        else:
            result = replay_locomo(read_locomo(args.file), methods)
            report = locomo_report(args.file, result)
            text = locomo_text
    except (OSError, ValueError) as error:  # json.JSONDecodeError is a ValueError
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2) if args.json else text(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
