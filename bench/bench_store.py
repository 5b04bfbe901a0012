"""soul.json under stress: writers killed with SIGKILL, and two servers sharing one file.

    .venv/bin/python bench/bench_store.py crash [--kills 1000] [--nodes 10000] [--faults 0.2]
    .venv/bin/python bench/bench_store.py share [--ops 2000] [--nodes 10000] [--modes sequential,concurrent]
    .venv/bin/python bench/bench_store.py write [--nodes 100000] [--writes 300] [--rounds 3] [--base 04df4cc]

crash: a writer child is forked, writes linked memories (some also linking, pinning or
splaying an older node) and is killed with SIGKILL at a random moment, over and over on the
same file; after each kill the file is loaded fresh and held against every acknowledged
write (tests/crash_harness.py). Journal settings make compaction frequent, and a quarter
of the writers compact on every write, so kills land mid-compaction too. With --faults, that
share of write attempts also meets an injected I/O failure (ENOSPC, EIO, EROFS) at a random
write, fsync, rename or unlink of the store (tests/faulty_io.py): refused, then tried again.

share: two MCP servers (`python -m soulgraph.mcp`, driven by the SDK's stdio client) on one
file (tests/share_harness.py), 70% writes, in two modes:
- sequential: one call at a time, alternating between the servers, each write checked at
  once by a read on the other server: the latency of one pipeline;
- concurrent: two driver coroutines at once, one per server, each as fast as its server
  answers, writing its own nodes and reading both drivers' nodes; every read must show
  each write the other driver had acknowledged before the read was sent: what two servers
  sustain together.
Baselines, in the same invocation: each mode against one server alone (the concurrent one
with both drivers on that one server), so the table shows what sharing costs.

write: a durable write's cost in-process, as a server pays it: one soul file of --nodes
memories, loaded by a fresh process, then --writes changes (a memory built on an older one),
each timed from `soul.change()` opening to its record fdatasynced. This tree and --base (a
temporary git worktree) take turns in --rounds pairs of processes on copies of the same file,
so the ratio compares them under the same load. The disk's own floor takes its turn in each
round too: a child appending records of the journal's mean record size to a file in the same
directory, each fdatasynced (what a durable write cannot do without); `x floor p50` is a row's
p50 over the floor's.

Everything runs against local processes, and every wait has a timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.crash_harness import (CrashConfig, CrashReport, check_command_available,  # noqa: E402
                                 journal_supported, run_crash)
from tests.share_harness import ShareConfig, ShareReport, prepare_and_share  # noqa: E402


def store_line() -> str:
    journal = "append-only journal" if journal_supported() else "whole-file rewrite per change (journal options ignored)"
    check = "available" if check_command_available() else "not available"
    return f"python {sys.version.split()[0]}, store: {journal}; `python -m soulgraph.store check`: {check}"


def print_problems(problems: list[str]) -> None:
    for problem in problems[:20]:
        print(f"  ! {problem}")


# ---------------------------------------------------------------------------- crash
def crash(args: argparse.Namespace) -> int:
    config = CrashConfig(nodes=args.nodes, kills=args.kills, seed=args.seed, journal_share=args.journal_share,
                         journal_min_bytes=args.journal_min_bytes, compact_every_write=args.compact_every_write,
                         writes_per_kill=args.writes_per_kill, check_every=args.check_every,
                         fault_share=args.faults)
    print(store_line())
    print(f"{config.nodes} prepared nodes; journal_share {config.journal_share}, journal_min_bytes "
          f"{config.journal_min_bytes}; {config.compact_every_write:.0%} of writers compact every write; "
          f"~{config.writes_per_kill:g} writes per kill; check every {config.check_every or 'never'}; "
          f"I/O faults injected into {config.fault_share:.0%} of write attempts\n")
    started = time.monotonic()
    last_print = [started]

    def progress(report: CrashReport) -> None:
        if args.progress and time.monotonic() - last_print[0] > args.progress:
            last_print[0] = time.monotonic()
            print(f"  ... {report.kills} kills, {report.writes} writes, {report.refused} refused, lost {report.lost}, "
                  f"half-applied {report.half_applied}, {report.seconds:.0f} s", flush=True)

    with tempfile.TemporaryDirectory(prefix="soulbench-crash-") as work:
        report = run_crash(Path(work) / "soul.json", config, progress)
    header = (f"{'nodes':>6} | {'kills':>5} | {'writes':>6} {'unacked':>7} {'refused':>7} | {'lost':>4} {'half':>4} {'unread':>6} | "
              f"{'compactions':>11} {'mid':>4} {'after':>5} | {'checks':>6} {'failed':>6} {'torn':>4} | "
              f"{'seconds':>7} {'s/kill':>6}")
    print(header)
    print("-" * len(header))
    print(f"{report.nodes:>6} | {report.kills:>5} | {report.writes:>6} {report.landed_unacked:>7} {report.refused:>7} | "
          f"{report.lost:>4} {report.half_applied:>4} {report.unreadable:>6} | "
          f"{report.compactions:>11} {report.kills_mid_compaction:>4} {report.kills_after_compaction:>5} | "
          f"{report.checks:>6} {report.check_failures:>6} {report.torn_tails:>4} | "
          f"{report.seconds:>7.1f} {report.seconds / max(1, report.kills + report.child_errors):>6.2f}")
    print("\nwrites: acknowledged; unacked: durable but killed before the ack (allowed, at most one per kill);"
          "\nrefused: write attempts an injected I/O failure refused (each tried again with the same content);"
          "\nlost / half: acknowledged facts missing / the write in flight partly there; unread: loads that failed;"
          "\ncompactions: soul.json replaced (inode changed); mid: kills that left a rewrite's temp file;"
          "\nafter: kills of a writer that had replaced soul.json; torn: checks reporting a torn journal tail.")
    print_problems(report.problems)
    return 0 if report.ok else 1


# ---------------------------------------------------------------------------- write
# Run in a child with PYTHONPATH set to one tree's runtime: that tree's store does the writes.
WRITE_TIMER = r"""
import json, os, random, sys, time
import soulgraph.memory  # noqa: E402,F401  the write guard, as every writer installs it
from soulgraph.store import SoulFile
path, writes = sys.argv[1], int(sys.argv[2])
soul = SoulFile(path)
started = time.perf_counter()
graph = soul.graph()
load = time.perf_counter() - started
ids, rng, times = list(graph.nodes), random.Random(3), []
for i in range(writes):
    parent = rng.choice(ids)
    started = time.perf_counter()
    with soul.change() as graph:
        graph.add(f"durable write {i}: a memory built on an older one", ["bench"], parents=[parent])
    times.append(time.perf_counter() - started)
journal = path + ".journal"
lines = open(journal, "rb").read().count(b"\n") if os.path.exists(journal) else 0
record = os.path.getsize(journal) / lines if lines else 0  # the mean record (one a line)
print(json.dumps({"load": load, "times": times, "compactions": soul.compactions, "record": record}))
"""

# The disk's floor: the same number of appends of one record's size, each fdatasynced.
FLOOR_TIMER = r"""
import json, os, sys, time
path, writes, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sync = getattr(os, "fdatasync", os.fsync)
record, times = b"x" * (size - 1) + b"\n", []
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
try:
    for _ in range(writes):
        started = time.perf_counter()
        os.write(fd, record)
        sync(fd)
        times.append(time.perf_counter() - started)
finally:
    os.close(fd)
print(json.dumps({"times": times}))
"""
FLOOR = "disk floor"


def timed_writes(runtime: Path, soul_file: Path, writes: int, timeout: float) -> dict:
    env = {**os.environ, "PYTHONPATH": str(runtime)}
    proc = subprocess.run([sys.executable, "-c", WRITE_TIMER, str(soul_file), str(writes)], env=env,
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode:
        raise RuntimeError(f"the writer under {runtime} failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def timed_floor(folder: Path, writes: int, size: int, timeout: float) -> list[float]:
    proc = subprocess.run([sys.executable, "-c", FLOOR_TIMER, str(folder / "floor.journal"), str(writes), str(size)],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode:
        raise RuntimeError(f"the disk floor's writer failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["times"]


def write(args: argparse.Namespace) -> int:
    import synthetic  # bench/ is on the path (this script's folder)
    from revisions import worktree  # a temporary checkout of a revision

    print(store_line())
    print(load_line())
    trees = {"this tree": ROOT / "runtime"}
    with tempfile.TemporaryDirectory(prefix="soulbench-write-") as work, worktree(args.base) as base_tree:
        trees[args.base[:12]] = base_tree / "runtime"
        source = Path(work) / "source.json"
        started = time.monotonic()
        from soulgraph.store import SoulFile
        SoulFile(source).save(synthetic.build(args.nodes, seed=1))
        print(f"{args.nodes} memories, {source.stat().st_size / 1e6:.1f} MB, built in {time.monotonic() - started:.1f} s; "
              f"{args.writes} writes per process, {args.rounds} rounds, the two trees taking turns\n")
        samples: dict[str, list[float]] = {name: [] for name in [*trees, FLOOR]}
        loads: dict[str, list[float]] = {name: [] for name in trees}
        records: list[float] = []
        for round_ in range(args.rounds):
            for name in (list(trees) if round_ % 2 == 0 else list(reversed(trees))):
                copy = Path(work) / f"round{round_}-{name.replace(' ', '-')}" / "soul.json"
                copy.parent.mkdir()
                shutil.copy2(source, copy)
                result = timed_writes(trees[name], copy, args.writes, args.timeout)
                samples[name].extend(result["times"])
                loads[name].append(result["load"])
                if name == "this tree" and result.get("record"):
                    records.append(result["record"])
                shutil.rmtree(copy.parent)
            size = round(statistics.median(records)) if records else 400
            samples[FLOOR].extend(timed_floor(Path(work), args.writes, size, args.timeout))
            (Path(work) / "floor.journal").unlink()
    header = (f"{'tree':<12} | {'writes':>6} | {'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7} | {'x base p50':>10} | "
              f"{'x floor p50':>11} | {'load s':>6}")
    print(header)
    print("-" * len(header))
    base_p50 = statistics.median(samples[args.base[:12]])
    floor_p50 = statistics.median(samples[FLOOR])
    for name, times in samples.items():
        ordered = sorted(times)
        p50 = statistics.median(ordered)
        p90, p99 = ordered[int(0.9 * (len(ordered) - 1))], ordered[int(0.99 * (len(ordered) - 1))]
        load = f"{statistics.median(loads[name]):>6.2f}" if name in loads else f"{'':>6}"
        print(f"{name:<12} | {len(times):>6} | {p50 * 1e3:>7.2f} {p90 * 1e3:>7.2f} {p99 * 1e3:>7.2f} | "
              f"{p50 / base_p50:>10.2f} | {p50 / floor_p50:>11.2f} | {load}")
    print("\np50/p90/p99: one durable change (soul.change() to its journal record fdatasynced), all rounds together;"
          f"\n{FLOOR}: an append of one record's size ({size} bytes, this tree's mean) fdatasynced, in the same directory;"
          "\nx base p50 / x floor p50: this row's p50 over the base revision's / the disk floor's;"
          "\nload s: the fresh process's first full read.")
    return 0


# ---------------------------------------------------------------------------- share
SHARE_ROWS = (  # label, servers, concurrent
    ("one server, sequential", 1, False),
    ("two servers, sequential", 2, False),
    ("one server, concurrent", 1, True),
    ("two servers, concurrent", 2, True),
)
REQUIRED_WRITES_PER_SECOND = 200.0  # two servers, concurrent


def load_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def share_row(label: str, report: ShareReport, base: ShareReport | None) -> str:
    ratio = f"{report.ops_per_second / base.ops_per_second:.2f}" if base and base.ops_per_second else "1.00"
    return (f"{label:<23} | {report.servers:>7} | {report.ops:>5} {report.writes:>6} {report.reads:>5} "
            f"{report.checks:>6} | {report.seconds:>7.1f} | {report.ops_per_second:>6.1f} {report.writes_per_second:>8.1f} "
            f"{ratio:>7} {report.calls_per_second:>7.1f} | {report.stale:>5} {report.wrong:>5} {report.lost:>4} "
            f"{report.errors:>6}")


def share(args: argparse.Namespace) -> int:
    modes = {mode.strip() for mode in args.modes.split(",") if mode.strip()}
    unknown = modes - {"sequential", "concurrent"}
    if unknown or not modes:
        print(f"--modes: sequential and/or concurrent, not {sorted(unknown) or 'nothing'}", file=sys.stderr)
        return 2
    print(store_line())
    print(f"{args.nodes} prepared nodes; up to {args.ops} operations or {args.seconds:g} s per row, "
          f"{args.write_share:.0%} writes; {load_line()} before\n")
    header = (f"{'mode':<23} | {'servers':>7} | {'ops':>5} {'writes':>6} {'reads':>5} {'checks':>6} | "
              f"{'seconds':>7} | {'ops/s':>6} {'writes/s':>8} {'x alone':>7} {'calls/s':>7} | "
              f"{'stale':>5} {'wrong':>5} {'lost':>4} {'errors':>6}")
    print(header)
    print("-" * len(header), flush=True)
    reports: list[tuple[str, ShareReport]] = []
    bases: dict[bool, ShareReport] = {}
    for label, servers, concurrent in SHARE_ROWS:
        if ("concurrent" if concurrent else "sequential") not in modes:
            continue
        config = ShareConfig(servers=servers, concurrent=concurrent, ops=args.ops, seconds=args.seconds,
                             write_share=args.write_share, seed=args.seed, call_timeout=args.call_timeout,
                             follow_share=args.follow_share)
        with tempfile.TemporaryDirectory(prefix=f"soulbench-share-{servers}-{'c' if concurrent else 's'}-") as work:
            report = prepare_and_share(Path(work) / "soul.json", args.nodes, config)
        base = bases.setdefault(concurrent, report)
        reports.append((label, report))
        print(share_row(label, report, base), flush=True)
    print(f"\n{load_line()} after")
    print("\nops: workload calls (writes + reads), all drivers together; ops/s and writes/s count them over the"
          "\nrow's wall time; x alone: ops/s against the same mode on one server alone; calls/s: every call."
          "\nchecks, sequential: the extra read after each write, on the other server (counted in calls/s only);"
          "\nchecks, concurrent: reads of a node the other driver wrote, held against what it had acknowledged"
          "\nbefore the read was sent (soul_summary reads count too: their counts cover both drivers). With two"
          "\nservers, a check of a write acknowledged after the reader's previous answer is one its server could"
          "\nonly learn from the journal while answering that very read; --follow-share of the node reads wait"
          "\nfor the other driver's write in flight to make such checks (the waiting costs a little ops/s)."
          "\nstale: a read that did not show an acknowledged write; wrong: a read showing a state nobody had"
          "\nwritten by then; lost: nodes (or counts) not as written at the end, on either server or in a fresh"
          "\nload of the file.")
    for label, report in reports:
        if report.concurrent:
            print(f"{label}: {report.checks} checks; {report.fresh} of a write acknowledged after the reader's "
                  f"previous answer; {report.racing} sent while a write to the same node was in flight; "
                  f"at most {report.most_in_flight} calls in flight at once")
    print(f"\nCPU while timed, in cores ({os.cpu_count()} here): driver / servers / other processes on the machine")
    for label, report in reports:
        if report.seconds:
            print(f"  {label:<23} {report.driver_cpu / report.seconds:5.2f} / {report.servers_cpu / report.seconds:5.2f}"
                  f" / {report.others_cpu / report.seconds:5.2f}")
    two = next((r for label, r in reports if r.concurrent and r.servers == 2), None)
    if two is not None:
        met = two.writes_per_second >= REQUIRED_WRITES_PER_SECOND and two.ok
        print(f"requirement (two servers, concurrent: >= {REQUIRED_WRITES_PER_SECOND:g} mixed writes/s together, "
              f"0 lost, 0 stale): {two.writes_per_second:.1f} writes/s, lost {two.lost}, stale {two.stale} -> "
              f"{'met' if met else 'NOT met'}")
    for label, report in reports:
        if report.problems:
            print(f"{label}:")
            print_problems(report.problems)
    return 0 if all(r.ok for _, r in reports) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    c = commands.add_parser("crash", help="kill -9 a writer again and again; count lost and half-applied writes")
    c.add_argument("--kills", type=int, default=1000)
    c.add_argument("--nodes", type=int, default=10000)
    c.add_argument("--seed", type=int, default=1)
    c.add_argument("--journal-share", type=float, default=0.002,
                   help="compact when the journal passes this share of soul.json (small: compact often)")
    c.add_argument("--journal-min-bytes", type=int, default=0)
    c.add_argument("--compact-every-write", type=float, default=0.25,
                   help="share of writers run with journal_share=0, journal_min_bytes=0")
    c.add_argument("--writes-per-kill", type=float, default=6.0, help="mean acknowledged writes before a kill")
    c.add_argument("--check-every", type=int, default=10,
                   help="run `python -m soulgraph.store check` after every n-th kill (0: never)")
    c.add_argument("--progress", type=float, default=30.0, help="print progress every so many seconds (0: never)")
    c.add_argument("--faults", type=float, default=0.0,
                   help="share of write attempts that meet an injected I/O failure (ENOSPC, EIO, EROFS)")
    s = commands.add_parser("share", help="two MCP servers on one file, against one server alone")
    s.add_argument("--ops", type=int, default=2000, help="workload calls per row (all drivers together)")
    s.add_argument("--seconds", type=float, default=600.0, help="stop a row after this long even if --ops is not done")
    s.add_argument("--nodes", type=int, default=10000)
    s.add_argument("--write-share", type=float, default=0.7)
    s.add_argument("--seed", type=int, default=5)
    s.add_argument("--call-timeout", type=float, default=60.0, help="a tool call slower than this fails the run")
    s.add_argument("--follow-share", type=float, default=0.5,
                   help="concurrent: share of node reads that wait for the other driver's write in flight, "
                        "then read its node at once")
    s.add_argument("--modes", default="sequential,concurrent",
                   help="which rows: sequential (one call at a time), concurrent (two drivers at once), or both")
    w = commands.add_parser("write", help="a durable write's p50 in-process, this tree against a base revision")
    w.add_argument("--nodes", type=int, default=100_000)
    w.add_argument("--writes", type=int, default=300)
    w.add_argument("--rounds", type=int, default=3)
    w.add_argument("--base", default="04df4cc", help="the revision to compare with (default 04df4cc)")
    w.add_argument("--timeout", type=float, default=600.0, help="seconds one writer process may take")
    args = parser.parse_args()
    return {"crash": crash, "share": share, "write": write}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
