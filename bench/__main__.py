"""The benchmarks: what each measures, which page quotes its figures, and a runner.

    .venv/bin/python -m bench                     # the table below (bench/run does the same)
    .venv/bin/python -m bench NAME [ARGS...]      # run bench/NAME.py ARGS with a timeout
    .venv/bin/python -m bench --timeout 600 NAME [ARGS...]

Every benchmark is one entry of BENCHES, the only list; tests/test_bench_index.py fails when a
script in bench/ is in neither BENCHES nor HELPERS, or an entry has no script. The run time is a
rough figure for the script's defaults on a two-core machine; NAME runs with the same Python as
this module, from the repository root, and is killed (its whole process group) after --timeout
seconds, by default four times its run time and at least ten minutes. A benchmark that compares
against a baseline runs the baseline in the same invocation: see each script's docstring.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


class Bench(NamedTuple):
    measures: str  # the figure it makes
    quoted_in: str  # the page(s) that quote it
    minutes: float  # rough run time with the script's defaults
    needs: str = ""  # beyond the project's venv


SHARED = "../shared/data"
HERMES = "Hermes venv"  # tests/hermes_client.py builds it on first use
LAB = "root, sshd (tests/lab.py)"

BENCHES: dict[str, Bench] = {
    "bench_engine": Bench("in-process question latency against the ranking before the bitmask index",
                          "docs/benchmarks.md", 5),
    "bench_load": Bench("soul.json load time into a queryable graph, against the one-by-one load",
                        "docs/benchmarks.md", 3),
    "bench_load_image": Bench("a large soul's load with and without its load image (parsed, first start, from the "
                              "image)", "docs/decisions/load-image.md", 3),
    "bench_mcp": Bench("MCP start-up and per-tool latency, against an SDK server doing nothing",
                       "docs/benchmarks.md", 10),
    "bench_first_answer": Bench("a fresh MCP server's first answers at 100,000 memories, against a base revision "
                                "and an SDK server doing nothing", "docs/benchmarks.md", 3),
    "bench_memories_web": Bench("the memories web page's first load and a search at 100,000 memories, against "
                                "the same library calls in-process", "docs/memories.md", 4),
    "bench_snapshot": Bench("the bounded prompt snapshot's build time, against the prime's hot list",
                            "docs/benchmarks.md, docs/soul-graph.md", 1),
    "bench_store": Bench("soul.json under SIGKILL (crash), two servers sharing it (share), write cost (write)",
                         "docs/benchmarks.md, docs/soul-graph.md", 30),
    "bench_rss": Bench("an MCP server's resident memory after writes, against a base revision",
                       "docs/benchmarks.md, docs/decisions/lean-memory.md", 10),
    "bench_prefetch_block": Bench("the prefetch block on LoCoMo: a share of the budget per memory against whole lines "
                                  "with the last cut (evidence, answer words, build time)",
                                  "docs/decisions/prefetch-block.md", 1, SHARED),
    "bench_provider": Bench("what the memory provider adds to a Hermes turn, against a provider doing nothing",
                            "docs/memory-provider.md, docs/benchmarks.md", 5, HERMES),
    "bench_tokens": Bench("characters the model receives from each soul tool, through Hermes",
                          "docs/soul-graph.md", 3, HERMES),
    "probe_scopes": Bench("memory leaks between users through every read path (0 is the pass)",
                          "docs/benchmarks.md, docs/soul-graph.md", 3, HERMES),
    "bench_embed": Bench("what the vectors cost: a question's recall, a new memory's vector, memory, start-up",
                         "docs/embeddings.md", 10, SHARED),
    "bench_ivf": Bench("the vector search's cells against the whole shortlist and the exact search",
                       "docs/decisions/index.md", 10, SHARED),
    "bench_threads": Bench("hybrid recall with one BLAS thread against the library's default, under load",
                           "docs/embeddings.md", 5, SHARED),
    "bench_vectors_answers": Bench("a vector index change's answers and time, against a base commit",
                                   "docs/embeddings.md", 20, SHARED),
    "bench_vectors_memory": Bench("resident memory of a soul's graph and vectors: loading them, then writes",
                                  "docs/embeddings.md, docs/benchmarks.md", 10),
    "row_precision": Bench("the share of the exact nearest the vectors' rows find in float16 and in int8",
                           "docs/benchmarks.md, docs/decisions/lean-memory.md", 2, SHARED),
    "crowd_locomo": Bench("LoCoMo dev recall with each conversation inside a 10,000-memory store",
                          "docs/eval.md, docs/embeddings.md, docs/decisions/fusion.md", 10, SHARED),
    "holdout_locomo": Bench("LoCoMo dev R@10 of hybrid recall's weights, one conversation left out",
                            "docs/eval.md, docs/embeddings.md, docs/decisions/fusion.md", 2, SHARED),
    "length_weighting": Bench("recall's length weighting for a search in words: the ledgers, LoCoMo and BEAM by b",
                              "docs/decisions/length-weighting.md", 5, SHARED),
    "train_reranker": Bench("fits the reranking stage; LoCoMo dev with and without it, each conversation held out",
                          "docs/decisions/reranker.md", 1, SHARED),
    "peer_holographic": Bench("Hermes' holographic memory provider beside ours on LoCoMo dev",
                              "docs/eval.md", 15, f"{HERMES}, {SHARED}"),
    "bench_entities": Bench("the entity recogniser's precision and recall on hand-labelled LoCoMo turns",
                            "docs/decisions/entity-recogniser.md", 1, SHARED),
    "bench_poison": Bench("the write-time scanner on the attack corpora: caught, wrongly flagged, cost",
                          "docs/scanner.md, docs/decisions/injection-detector.md", 3, SHARED),
    "bench_poison_paths": Bench("the corpora's injections through every write path: any reaching a prompt",
                                "docs/benchmarks.md", 10, SHARED),
    "bench_secret_rules": Bench("the secret rules' recall, false alarms and cost, against the hand-written rules",
                                "docs/decisions/secret-rule-sets.md", 2, SHARED),
    "train_injection_model": Bench("trains the scanner's injection detector; its cross-validated scores",
                                   "docs/scanner.md, docs/decisions/injection-detector.md", 3, SHARED),
    "bench_fleet": Bench("fleet-update against ansible-playbook: first deploy and no-change re-run",
                         "docs/benchmarks-fleet.md, docs/fleet.md, docs/roles.md", 30, LAB),
    "bench_fleet_ab": Bench("fleet-update's no-change re-run, two commits interleaved on twin labs",
                            "docs/benchmarks-fleet.md", 15, LAB),
    "bench_verify": Bench("`fleet verify` against `fleet status` on the same deployed hosts",
                          "docs/fleet-verify.md, docs/benchmarks-fleet.md", 10, LAB),
}

# Modules in bench/ that are not benchmarks: the benchmarks (and some tests) import them.
HELPERS: dict[str, str] = {
    "synthetic": "a deterministic synthetic soul graph of any size",
    "revisions": "a temporary git worktree of a baseline revision",
    "benign_chat": "seeded benign text, training data of train_injection_model",
}


def timeout_for(bench: Bench) -> float:
    return max(600.0, 4 * 60 * bench.minutes)


def table() -> str:
    rows = [("name", "what it measures", "quoted in", "run time, needs")]
    for name, b in BENCHES.items():
        time = f"~{b.minutes:g} min" + (f"; {b.needs}" if b.needs else "")
        rows.append((name, b.measures, b.quoted_in, time))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + "  " + r[3] for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths) + "  " + "-" * len(rows[0][3]))
    lines.append("")
    lines.append("Not benchmarks (imported by them): "
                 + "; ".join(f"{n}.py, {what}" for n, what in HELPERS.items()) + ".")
    lines.append("Run one: .venv/bin/python -m bench [--timeout SECONDS] NAME [ARGS...] "
                 "(or bench/run NAME ...); NAME's own --help lists its ARGS.")
    return "\n".join(lines)


def run(name: str, args: list[str], timeout: float | None = None) -> int:
    bench = BENCHES[name]
    timeout = timeout_for(bench) if timeout is None else timeout
    command = [sys.executable, str(HERE / f"{name}.py"), *args]
    print(f"# bench/{name}.py {' '.join(args)}  (timeout {timeout:g} s)", file=sys.stderr, flush=True)
    child = subprocess.Popen(command, cwd=REPO, start_new_session=True)
    try:
        return child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"# bench/{name}.py: no end after {timeout:g} s, stopped", file=sys.stderr)
        return _stop(child, 124)
    except KeyboardInterrupt:
        return _stop(child, 130)


def _stop(child: subprocess.Popen, code: int) -> int:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            break
        try:
            child.wait(timeout=10)
            break
        except subprocess.TimeoutExpired:
            continue
    return code


def main(argv: list[str]) -> int:
    timeout = None
    if argv[:1] == ["--timeout"] and len(argv) >= 2:
        timeout, argv = float(argv[1]), argv[2:]
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(table())
        return 0
    name = argv[0].removeprefix("bench/").removesuffix(".py")
    if name not in BENCHES:
        print(f"no benchmark {argv[0]!r}; the list: .venv/bin/python -m bench", file=sys.stderr)
        return 2
    return run(name, argv[1:], timeout)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
