"""The prefetch block's two forms on LoCoMo: a share of the budget for each memory (memory/snippets.py,
shipped) against whole lines with the last one cut (the block before it), on the same questions.

    .venv/bin/python bench/bench_prefetch_block.py [--data locomo-dev.json] [--repeat 20]

LoCoMo goes through the memory provider twice, as `python -m soulgraph.eval provider` runs it
(soulgraph.eval.provider: every turn through `sync_turn`, every question through `recall`), once
with each form building the block. For each form: the share of the evidence injected (at most 8
memories in 1,500 characters), the share of each written answer's words the block holds (LoCoMo's
`answer`; the adversarial questions have none), the memories shown and the characters used.
Then the time each form takes to build the block from the same inputs (the lines' heads, the
memories' texts, the question's words: those of every question of the first replay), each block
built --repeat times: p50 and p99 in µs, and the ratio to the whole-lines form.

On the dev set the reranking stage that orders the block was fitted on these conversations, so
both forms' evidence shares are in-sample; `bench/train_reranker.py` gives them held out.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Mapping, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "runtime"))

from soulgraph.engine import embeddings  # noqa: E402,F401  (first: pins the BLAS threads)
from soulgraph.eval import provider  # noqa: E402
from soulgraph.eval.locomo import read_locomo  # noqa: E402
from soulgraph.memory import snippets  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"


def whole_lines(heads: Sequence[str], texts: Sequence[str], budget: int,
                asked: Mapping[str, float]) -> list[tuple[int, str]]:
    """The block before memory/snippets.py: whole lines, best first, the one that reaches the
    budget cut to it (left out below 40 characters of room), none after it."""
    lines, used = [], 0
    for i, (head, text) in enumerate(zip(heads, texts)):
        line = head + snippets.flat(text)
        if used + len(line) + 1 > budget:
            room = int(budget) - used - 1
            if room < 40:
                break
            line = line[: room - 1] + snippets.ELLIPSIS
        lines.append((i, line))
        used += len(line) + 1
    return lines


FORMS = {"a share each (shipped)": snippets.fit, "whole lines, the last cut": whole_lines}


def replay(data: list, form, inputs: list | None = None) -> dict:
    """One provider replay with `form` building every block; `inputs` collects each block's."""
    def building(heads, texts, budget, asked):
        if inputs is not None:
            inputs.append((list(heads), list(texts), budget, dict(asked)))
        return form(heads, texts, budget, asked)

    kept = snippets.fit
    snippets.fit = building
    try:
        return provider.replay(data, direct=False)
    finally:
        snippets.fit = kept


def timings(form, inputs: list, repeat: int) -> list[float]:
    """µs to build each block, each the median of `repeat` builds, none helped by the sentences
    a build before split (memory/snippets.py keeps them for memories shown again)."""
    out = []
    for heads, texts, budget, asked in inputs:
        runs = []
        for _ in range(repeat):
            snippets.clear_cache()  # each build as for memories shown the first time
            started = time.perf_counter()
            form(heads, texts, budget, asked)
            runs.append(time.perf_counter() - started)
        out.append(statistics.median(runs) * 1e6)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--repeat", type=int, default=20, help="builds of each block for its time")
    args = parser.parse_args()
    data = read_locomo(args.data)
    inputs: list = []
    rows = {}
    for name, form in FORMS.items():
        run = replay(data, form, inputs if not inputs else None)
        rows[name] = {"evidence": provider.scores(run["questions"])["R@10"],
                      "answer words": statistics.mean(run["answer_words"]),
                      "answers": len(run["answer_words"]),
                      "memories": statistics.mean(run["injected_items"]),
                      "characters": statistics.mean(run["injected_chars"]),
                      "questions": len(run["questions"]), "budget": run["budget"], "limit": run["limit"]}
    # The forms take turns, twice, so a slow spell of the machine falls on both.
    times: dict[str, list[float]] = {name: [] for name in FORMS}
    for _ in range(2):
        for name, form in FORMS.items():
            times[name] += timings(form, inputs, args.repeat)
    first = next(iter(rows.values()))
    print(f"LoCoMo {args.data.name} through the memory provider: {first['questions']:,} questions, "
          f"{first['answers']:,} with a written answer; at most {first['limit']} memories in {first['budget']:,} "
          f"characters; {len(inputs):,} blocks timed, each built {args.repeat} times, the forms in turn, twice\n")
    base = statistics.median(times["whole lines, the last cut"])
    print("| block | evidence injected | answer words | memories shown | characters | build p50 µs | p99 µs | x whole lines p50 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, row in rows.items():
        spent = sorted(times[name])
        p50, p99 = statistics.median(spent), spent[min(len(spent) - 1, int(0.99 * len(spent)))]
        print(f"| {name} | {row['evidence']:.3f} | {row['answer words']:.3f} | {row['memories']:.1f} | "
              f"{row['characters']:,.0f} | {p50:.0f} | {p99:.0f} | {p50 / base:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
