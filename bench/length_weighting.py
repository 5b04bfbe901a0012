"""Length weighting in recall: BM25's b for a search in words, on the ledgers, LoCoMo and BEAM.

    python bench/length_weighting.py [--data ../shared/data] [--b 0,0.2,0.75] [--no-questions]

Recall weighs its matches' lengths for a search in words (`memory/ranking.length_factors`,
b = `LENGTH_B`), never for a question (`ranking.weighs_length`). For each b, with b = 0 the
ranking without the weighing (every factor is 1):

- the served ranking (`hybrid_related`, what `soul_related` returns) on each dev ledger's
  long-range built-on questions, beside BM25 and the plain graph walk (`related`), which the
  weighing does not touch;
- the weighing applied to questions as well, which the shipped rule leaves out: LoCoMo dev
  `hybrid` (R@1, R@10, MRR, and each category's R@10) and BEAM's knowledge updates through the
  provider (`soulgraph.eval updates`). `--no-questions` skips these (about a minute a b).

Everything runs in this process on the dev sets; about three minutes for three values of b.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "runtime"))

from soulgraph.eval import updates  # noqa: E402
from soulgraph.eval.ledger import read_ledger  # noqa: E402
from soulgraph.eval.locomo import read_locomo, replay_locomo  # noqa: E402
from soulgraph.eval.replay import replay_ledger  # noqa: E402
from soulgraph.eval.report import ledger_report, locomo_report  # noqa: E402
from soulgraph.memory import ranking  # noqa: E402

LEDGERS = ("peps", "eips", "keps")
LEDGER_METHODS = ["bm25", "related", "hybrid_related"]


def ledger_row(path: Path) -> dict[str, dict[str, float]]:
    ledger = read_ledger(str(path))
    report = ledger_report(ledger, replay_ledger(ledger, LEDGER_METHODS))
    return report["scores"]["built_on"]["long_range"]["methods"]


def locomo_row(path: Path) -> tuple[dict[str, float], dict[str, float]]:
    report = locomo_report(str(path), replay_locomo(read_locomo(str(path)), ["hybrid"]))
    return (report["overall"]["methods"]["hybrid"],
            {name: row["methods"]["hybrid"]["recall@10"] for name, row in report["by_category"].items()})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--b", default="0,0.2,0.75", help="comma list of b values (default 0,0.2,0.75)")
    parser.add_argument("--no-questions", action="store_true", help="only the ledgers")
    args = parser.parse_args(argv)
    values = [float(v) for v in args.b.split(",")]
    shipped_b, shipped_gate = ranking.LENGTH_B, ranking.weighs_length
    print(f"shipped: b = {shipped_b}, k1 = {ranking.LENGTH_K1}, length capped at {ranking.LENGTH_CAP}x the matches' mean\n")

    print("Ledgers, long-range built-on (R@5 / R@10 / MRR); bm25 and related do not weigh lengths")
    print("| ledger | b | bm25 | related | hybrid_related (served) |\n|---|---|---|---|---|")
    fmt = lambda m: f"{m['recall@5']:.3f} / {m['recall@10']:.3f} / {m['mrr']:.3f}"  # noqa: E731
    try:
        for name in LEDGERS:
            for b in values:
                ranking.LENGTH_B = b
                row = ledger_row(args.data / "ledgers" / f"{name}_ledger.json")
                print(f"| {name} | {b:g} | {fmt(row['bm25'])} | {fmt(row['related'])} | {fmt(row['hybrid_related'])} |",
                      flush=True)
        if args.no_questions:
            return 0
        ranking.weighs_length = lambda text: True  # noqa: E731  (what the shipped rule leaves out)
        print("\nWeighing questions too: LoCoMo dev `hybrid`, and BEAM's updates through the provider")
        print("| b | LoCoMo R@1 / R@10 / MRR | R@10 by category | BEAM current in top 10 / stale shown as current"
              " / current above stale |\n|---|---|---|---|")
        records = updates.read_updates(args.data / "updates" / "updates-dev.jsonl")
        for b in values:
            ranking.LENGTH_B = b
            overall, categories = locomo_row(args.data / "locomo" / "locomo-dev.json")
            by_category = ", ".join(f"{name} {value:.3f}" for name, value in categories.items())
            beam = updates.figures(updates.replay(records)["scored"])
            print(f"| {b:g} | {overall['recall@1']:.3f} / {overall['recall@10']:.3f} / {overall['mrr']:.3f} "
                  f"| {by_category} | {beam['current_in_top']:.3f} / "
                  f"{beam['stale_shown_as_current']:.3f} / {beam['current_above_stale']:.3f} |", flush=True)
    finally:
        ranking.LENGTH_B, ranking.weighs_length = shipped_b, shipped_gate
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
