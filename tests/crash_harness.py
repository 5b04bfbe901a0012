"""Kill a soul.json writer with SIGKILL again and again and check what survives.

Used by tests/test_store_crash.py (short run) and bench/bench_store.py (long run).

A writer child is forked (after the imports, so it costs no Python start-up), opens the
file as a server would and loops over `with soul.change() as g: ...`, each change adding
one node `crash-<run>-<i>` built on the previous one and, now and then, also linking,
pinning or splaying an older node, so one durable record touches several nodes. After a
block exits (the store's acknowledgement) the child writes an ack line to a pipe. The
parent kills it at a random moment, reads every ack, then loads the file fresh and
checks it against a model of everything acknowledged:

- lost: an acknowledged write (or one seen durable after an earlier kill) is missing or
  changed: its node, content, parent edges, the pin or the splay it made;
- half-applied: the one write in flight at the kill is partly there (the node without
  its edge or its pin/splay, or the pin/splay without the node), or nodes that no write
  made appear.

What a write will do is a pure function of (seed, run, i, nodes known before it), so the
parent knows what the unacknowledged write in flight would have changed.

With `fault_share`, the child also runs the store over the fault-injecting file layer
(tests/faulty_io.py) and arms an I/O failure (ENOSPC, EIO or EROFS; once, or from then on) at a
random write, fsync, rename or unlink of that share of its writes. A refused write is said on
the pipe and tried again with the same content, so one that was refused but landed anyway
shows up as a node written twice (half-applied).
"""

from __future__ import annotations

import dataclasses
import errno
import importlib.util
import inspect
import json
import multiprocessing
import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import soulgraph.memory  # noqa: F401  the write guard, as a server installs it
from soulgraph.engine.graph import SoulGraph
from soulgraph.store import ChangeKept, SoulFile, SoulFileError

BENCH = Path(__file__).resolve().parent.parent / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))
import synthetic  # noqa: E402

CRASH_TAG = "crash"
# How one write touches a second node: (kind, probability).
OPERATIONS: tuple[tuple[str, float], ...] = (("plain", 0.35), ("link", 0.25), ("pin", 0.15), ("splay", 0.25))


def open_soul(path: str | os.PathLike[str], **options: Any) -> SoulFile:
    """SoulFile(path, **options), dropping the options this store does not take yet.

    The journal options (journal_share, journal_min_bytes) arrive with the append-only store;
    the whole-file store ignores them, so the same harness runs on both."""
    parameters = inspect.signature(SoulFile).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        options = {name: value for name, value in options.items() if name in parameters}
    return SoulFile(path, **options)


def journal_supported() -> bool:
    """Does this store take the journal options (is it the append-only store)?"""
    return "journal_share" in inspect.signature(SoulFile).parameters


def check_command_available() -> bool:
    """Is there a `python -m soulgraph.store check`? (It comes with the journal store.)"""
    return importlib.util.find_spec("soulgraph.store.__main__") is not None


def temp_files(path: Path) -> list[Path]:
    """Temp files an atomic rewrite of `path` leaves behind if killed mid-write."""
    return list(path.parent.glob(f".{path.name}.*.tmp"))


def inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


# ---------------------------------------------------------------------------- preparing
@dataclasses.dataclass
class Prepared:
    """What the file held before the first kill: the baseline every check adds to."""

    nodes: int
    edges: int
    pinned: frozenset[str]
    access: dict[str, int]


def describe(graph: SoulGraph) -> Prepared:
    return Prepared(
        nodes=len(graph),
        edges=sum(1 for _ in graph.edges()),
        pinned=frozenset(graph.pinned),
        access={node_id: node.access_count for node_id, node in graph.nodes.items()},
    )


def prepare(path: Path, nodes: int, seed: int = 1) -> Prepared:
    """Write a synthetic soul.json of `nodes` nodes (ids n1..nN) at `path`."""
    graph = synthetic.build(nodes, seed=seed)
    SoulFile(path).save(graph)
    return describe(graph)


# ---------------------------------------------------------------------------- the plan
def plan(seed: int, run: int, i: int, prepared_nodes: int, pool: Sequence[str]) -> tuple[str, str | None]:
    """What write i of a run does besides adding its node: (kind, target). Deterministic, so
    the parent can tell what the write in flight at a kill would have touched."""
    rng = random.Random(f"{seed}:{run}:{i}")
    roll, kind = rng.random(), OPERATIONS[-1][0]
    for name, share in OPERATIONS:
        if roll < share:
            kind = name
            break
        roll -= share
    if kind == "plain":
        return kind, None
    if pool and rng.random() < 0.5:
        return kind, pool[rng.randrange(len(pool))]
    return kind, f"n{rng.randint(1, prepared_nodes)}"


def _writer(path: str, options: dict[str, Any], run: int, seed: int, prepared_nodes: int, pool: list[str],
            previous: str, ack_fd: int, max_writes: int, max_seconds: float, fault_share: float = 0.0) -> None:
    """The child: open the file as a server would, then write until killed (bounded anyway)."""
    if fault_share:
        from tests import faulty_io

        faults = faulty_io.FaultPlan(random.Random(f"faults:{seed}:{run}"))
        with faulty_io.installed(faults):
            _write_loop(path, options, run, seed, prepared_nodes, pool, previous, ack_fd, max_writes, max_seconds,
                        fault_share, faults)
    else:
        _write_loop(path, options, run, seed, prepared_nodes, pool, previous, ack_fd, max_writes, max_seconds)


IO_FAULTS = (errno.ENOSPC, errno.EIO, errno.EROFS)


def _write_loop(path: str, options: dict[str, Any], run: int, seed: int, prepared_nodes: int, pool: list[str],
                previous: str, ack_fd: int, max_writes: int, max_seconds: float, fault_share: float = 0.0,
                faults: Any = None) -> None:
    soul = open_soul(path, **options)
    soul.graph()
    os.write(ack_fd, b'{"ready": true}\n')
    deadline = time.monotonic() + max_seconds
    for i in range(max_writes):
        if time.monotonic() > deadline:
            break
        kind, target = plan(seed, run, i, prepared_nodes, pool)
        content = f"crash-{run}-{i}"
        for attempt in range(4):
            armed = faults is not None and attempt < 3 and faults.rng.random() < fault_share
            if armed:
                faults.fail_at(faults.rng.randrange(12), faults.rng.choice(IO_FAULTS), sticky=faults.rng.random() < 0.3)
            try:
                with soul.change() as graph:
                    node = graph.add(content, [CRASH_TAG], parents=[previous])
                    if kind == "link":
                        graph.link(target, node.id)
                    elif kind == "pin":
                        graph.pin(target)
                    elif kind == "splay":
                        graph.splay(target)
                break
            except ChangeKept:
                break  # in the file, though something after it failed: it stands
            except SoulFileError as exc:
                if not armed or faults.fired is None:
                    raise
                refused = {"refused": i, "fault": faults.fired, "error": str(exc)[-160:]}
                os.write(ack_fd, json.dumps(refused).encode() + b"\n")
            finally:
                if faults is not None:
                    faults.disarm()
        # The block has exited: the change is durable. Only now may anyone be told.
        ack = {"i": i, "id": node.id, "content": content, "parents": [previous], "op": kind, "target": target}
        os.write(ack_fd, json.dumps(ack).encode() + b"\n")  # one write(2) of < PIPE_BUF: never torn
        pool.append(node.id)
        previous = node.id


# ---------------------------------------------------------------------------- the run
@dataclasses.dataclass
class CrashConfig:
    nodes: int = 2000
    kills: int = 40
    seed: int = 1
    # Journal settings of most runs: compact when the journal passes this share of the snapshot.
    journal_share: float = 0.002
    journal_min_bytes: int = 0
    # Share of runs whose writer compacts on every write (journal_share=0, journal_min_bytes=0).
    compact_every_write: float = 0.25
    # Mean acknowledged writes per kill: a kill comes after 0..2x this many acks, at a random
    # moment of the next write (or the one after).
    writes_per_kill: float = 6.0
    # Share of kills that may land while the child is still opening the file.
    early_kills: float = 0.05
    # Run `python -m soulgraph.store check` after every n-th kill (0: never), when it exists.
    check_every: int = 1
    child_timeout: float = 60.0
    check_timeout: float = 120.0
    max_writes_per_run: int = 10_000
    # Share of write attempts with an I/O failure injected into the store (0: none).
    fault_share: float = 0.0


@dataclasses.dataclass
class CrashReport:
    nodes: int = 0
    kills: int = 0
    writes: int = 0  # acknowledged
    landed_unacked: int = 0  # durable but killed before the ack: allowed, at most one per kill
    lost: int = 0
    half_applied: int = 0
    unreadable: int = 0
    child_errors: int = 0
    compactions: int = 0  # inode changes of soul.json seen by the parent
    kills_mid_compaction: int = 0  # a rewrite's temp file was left behind
    kills_after_compaction: int = 0  # soul.json was replaced while this child ran
    refused: int = 0  # writes refused by an injected I/O failure (then tried again)
    checks: int = 0
    check_failures: int = 0
    torn_tails: int = 0  # checks that reported torn_tail_bytes > 0
    max_journal_records: int = 0
    final_nodes: int = 0
    seconds: float = 0.0
    journal: bool = False
    problems: list[str] = dataclasses.field(default_factory=list)

    def problem(self, text: str) -> None:
        if len(self.problems) < 50:
            self.problems.append(text)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.half_applied or self.unreadable or self.child_errors or self.check_failures)


@dataclasses.dataclass
class _Crash:
    content: str
    parents: frozenset[str]


class Model:
    """Everything the file must hold beyond the prepared graph."""

    def __init__(self, prepared: Prepared, first_parent: str):
        self.prepared = prepared
        self.crash: dict[str, _Crash] = {}
        self.order: list[str] = []  # crash ids in write order: the children's target pool
        self.pinned: set[str] = set(prepared.pinned)
        self.access: dict[str, int] = {}  # expected access_count of nodes a write splayed
        self.previous = self.first_parent = first_parent

    def expected_access(self, node_id: str) -> int:
        return self.access.get(node_id, self.prepared.access.get(node_id, 0))

    def apply(self, node_id: str, content: str, parents: frozenset[str], kind: str, target: str | None) -> None:
        self.crash[node_id] = _Crash(content, parents)
        self.order.append(node_id)
        if kind == "pin" and target:
            self.pinned.add(target)
        elif kind == "splay" and target:
            self.access[target] = self.expected_access(target) + 1
        self.previous = node_id

    def edges(self) -> int:
        return self.prepared.edges + sum(len(c.parents) for c in self.crash.values())


class _AckReader:
    """Non-blocking line reader over the child's pipe."""

    def __init__(self, fd: int):
        self.fd, self.buffer, self.eof = fd, b"", False
        self.lines: list[dict[str, Any]] = []
        self.times: list[float] = []  # when each line was read, to estimate how long a write takes

    def pump(self, timeout: float) -> None:
        if self.eof:
            time.sleep(timeout)
            return
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return
        chunk = os.read(self.fd, 65536)
        if not chunk:
            self.eof = True
            return
        self.buffer += chunk
        *complete, self.buffer = self.buffer.split(b"\n")
        now = time.monotonic()
        for line in complete:
            self.lines.append(json.loads(line))
            self.times.append(now)

    def drain(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.eof:
            if time.monotonic() > deadline:
                raise TimeoutError("the writer's pipe stayed open after it died")
            self.pump(0.05)

    @property
    def ready(self) -> bool:
        return bool(self.lines) and self.lines[0].get("ready") is True

    @property
    def acks(self) -> list[dict[str, Any]]:
        return [line for line in self.lines if "id" in line]

    @property
    def refusals(self) -> list[dict[str, Any]]:
        return [line for line in self.lines if "refused" in line]


def run_check(path: Path, timeout: float) -> dict[str, Any]:
    """`python -m soulgraph.store check PATH` as an operator would run it."""
    proc = subprocess.run([sys.executable, "-m", "soulgraph.store", "check", str(path)],
                          capture_output=True, text=True, timeout=timeout)
    try:
        verdict = json.loads(proc.stdout)
    except ValueError:
        verdict = {"ok": False, "stdout": proc.stdout[-500:]}
    verdict["exit_code"] = proc.returncode
    verdict["stderr"] = proc.stderr[-500:]
    return verdict


def run_crash(path: Path, config: CrashConfig, progress: Callable[[CrashReport], None] | None = None) -> CrashReport:
    """Prepare `path` with config.nodes nodes, then kill writers on it config.kills times."""
    report = CrashReport(nodes=config.nodes, journal=journal_supported())
    prepared = prepare(path, config.nodes, seed=config.seed)
    model = Model(prepared, first_parent=f"n{config.nodes}")
    rng = random.Random(config.seed)
    context = multiprocessing.get_context("fork")
    write_seconds = 0.02  # running estimate of one write, for choosing kill moments
    started = time.monotonic()
    for run in range(config.kills):
        if rng.random() < config.compact_every_write:
            options = {"journal_share": 0.0, "journal_min_bytes": 0}
        else:
            options = {"journal_share": config.journal_share, "journal_min_bytes": config.journal_min_bytes}
        pool_before = list(model.order)
        read_fd, write_fd = os.pipe()
        child = context.Process(
            target=_writer, daemon=True,
            args=(str(path), options, run, config.seed, prepared.nodes, list(model.order), model.previous,
                  write_fd, config.max_writes_per_run, config.child_timeout, config.fault_share))
        last_inode, temps_before = inode(path), set(temp_files(path))
        child.start()
        os.close(write_fd)
        acks = _AckReader(read_fd)
        replaced = 0
        try:
            deadline = time.monotonic() + config.child_timeout
            def watch(until: Callable[[], bool]) -> None:
                """Read acks and watch soul.json's inode (1 ms steps) until `until()` or the child ends."""
                nonlocal replaced, last_inode
                while not until() and not acks.eof:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"run {run}: the writer made no progress in {config.child_timeout} s")
                    acks.pump(0.001)
                    now_inode = inode(path)
                    if now_inode != last_inode:
                        replaced += 1
                        last_inode = now_inode

            if rng.random() < config.early_kills:  # while it opens the file
                kill_at = time.monotonic() + rng.uniform(0.0, 0.05)
            else:
                # After a random number of acknowledged writes, at a random moment of the next
                # one(s): a write's own length varies (the first after opening, a compaction),
                # so counting acks spreads kills over runs better than a delay from the start.
                after = rng.randint(0, round(2 * config.writes_per_kill))
                watch(lambda: acks.ready and len(acks.acks) >= after)
                kill_at = time.monotonic() + rng.uniform(0.0, 1.5 * write_seconds)
            watch(lambda: time.monotonic() >= kill_at)
            if child.is_alive():
                os.kill(child.pid, signal.SIGKILL)
            child.join(config.child_timeout)
            if child.exitcode is None:
                raise TimeoutError(f"run {run}: the writer did not die")
            acks.drain(config.child_timeout)
        finally:
            os.close(read_fd)
        if inode(path) != last_inode:
            replaced += 1
        report.compactions += replaced
        if child.exitcode == -signal.SIGKILL:
            report.kills += 1
        elif child.exitcode != 0:
            report.child_errors += 1
            report.problem(f"run {run}: the writer failed with exit code {child.exitcode}")
        if len(acks.times) > 2:
            per_write = (acks.times[-1] - acks.times[1]) / (len(acks.times) - 2)
            write_seconds = 0.8 * write_seconds + 0.2 * per_write
        report.refused += len(acks.refusals)
        report.kills_mid_compaction += bool(set(temp_files(path)) - temps_before)
        report.kills_after_compaction += replaced > 0
        if not _verify(path, options, config, run, acks.acks, pool_before, model, report):
            break  # the file cannot be read: nothing after this would mean anything
        if config.check_every and (run + 1) % config.check_every == 0 and check_command_available():
            _check(path, config, model, report, run)
        if progress:
            report.seconds = time.monotonic() - started
            progress(report)
    report.seconds = time.monotonic() - started
    return report


def _verify(path: Path, options: dict[str, Any], config: CrashConfig, run: int, acks: list[dict[str, Any]],
            pool: list[str], model: Model, report: CrashReport) -> bool:
    """Load the file fresh and hold it against the model; adopt what is seen so that one
    fault is counted once. Returns False when the file cannot be loaded at all."""
    try:
        graph = open_soul(path, **options).graph()
    except SoulFileError as exc:
        report.unreadable += 1
        report.problem(f"run {run}: the file does not load after the kill: {exc}")
        return False
    prepared_nodes = model.prepared.nodes
    # 1. Every ack is a write that must be there.
    for i, ack in enumerate(acks):
        kind, target = plan(config.seed, run, i, prepared_nodes, pool)
        expected_content = f"crash-{run}-{i}"
        if (ack["i"], ack["content"], ack["op"], ack["target"], ack["parents"]) != (i, expected_content, kind, target, [model.previous]):
            report.problem(f"run {run}: ack {i} is not what the plan says: {ack}")
        kind, target = ack["op"], ack["target"]  # what the child did, should the two ever differ
        parents = {model.previous} | ({target} if kind == "link" and target else set())
        model.apply(ack["id"], expected_content, frozenset(parents), kind, target)
        pool.append(ack["id"])
        report.writes += 1
    # 2. The write in flight: all of it or none of it.
    i = len(acks)
    kind, target = plan(config.seed, run, i, prepared_nodes, pool)
    expected_content = f"crash-{run}-{i}"
    expected_parents = frozenset({model.previous} | ({target} if kind == "link" and target else set()))
    extra = sorted({node.id for node in graph.by_tag(CRASH_TAG)} - model.crash.keys())
    in_flight = [node_id for node_id in extra if graph.nodes[node_id].content == expected_content]
    for node_id in extra:
        if node_id not in in_flight:
            report.half_applied += 1
            report.problem(f"run {run}: crash node {node_id} ({graph.nodes[node_id].content!r}) was never written")
            _adopt(graph, node_id, model)
    if len(in_flight) > 1:
        report.half_applied += len(in_flight) - 1
        report.problem(f"run {run}: the write in flight appears {len(in_flight)} times")
    if in_flight:
        node_id = in_flight[0]
        whole = frozenset(graph.parents[node_id]) == expected_parents
        if kind == "pin" and target:
            whole &= graph.nodes[target].pinned
        elif kind == "splay" and target:
            whole &= graph.nodes[target].access_count == model.expected_access(target) + 1
        if whole:
            report.landed_unacked += 1
            model.apply(node_id, expected_content, expected_parents, kind, target)
        else:
            report.half_applied += 1
            report.problem(f"run {run}: write {i} ({kind} {target}) is only partly there: node {node_id}")
            _adopt(graph, node_id, model)
            model.previous = node_id
        for node_id in in_flight[1:]:
            _adopt(graph, node_id, model)
    elif target and target in graph.nodes:
        # Not there: then neither is its side effect.
        if kind == "pin" and graph.nodes[target].pinned and target not in model.pinned:
            report.half_applied += 1
            report.problem(f"run {run}: write {i} pinned {target} but its node is missing")
            model.pinned.add(target)
        elif kind == "splay" and graph.nodes[target].access_count == model.expected_access(target) + 1:
            report.half_applied += 1
            report.problem(f"run {run}: write {i} splayed {target} but its node is missing")
            model.access[target] = graph.nodes[target].access_count
    # 3. Everything the model holds is there, as it was written.
    for node_id, crash in list(model.crash.items()):
        node = graph.nodes.get(node_id)
        if node is None:
            report.lost += 1
            report.problem(f"run {run}: acknowledged node {node_id} ({crash.content}) is gone")
            del model.crash[node_id]
            model.order.remove(node_id)
        elif node.content != crash.content or frozenset(graph.parents[node_id]) != crash.parents:
            report.lost += 1
            report.problem(f"run {run}: node {node_id} is {node.content!r} on {sorted(graph.parents[node_id])}, "
                           f"acknowledged as {crash.content!r} on {sorted(crash.parents)}")
            _adopt(graph, node_id, model)
    for node_id in sorted(model.pinned):
        node = graph.nodes.get(node_id)
        if node is not None and not node.pinned:
            report.lost += 1
            report.problem(f"run {run}: the acknowledged pin of {node_id} is gone")
            model.pinned.discard(node_id)
    for node_id, count in list(model.access.items()):
        node = graph.nodes.get(node_id)
        if node is not None and node.access_count != count:
            if node.access_count < count:
                report.lost += 1
            else:
                report.half_applied += 1
            report.problem(f"run {run}: {node_id} was used {node.access_count} times, acknowledged {count}")
            model.access[node_id] = node.access_count
    if model.previous not in graph.nodes:  # lost: the next writer builds on what is there
        model.previous = model.order[-1] if model.order else model.first_parent
    # 4. Counts, which also cover the prepared graph.
    for what, seen, expected in (("nodes", len(graph), prepared_nodes + len(model.crash)),
                                 ("edges", sum(1 for _ in graph.edges()), model.edges()),
                                 ("pins", len(graph.pinned), len(model.pinned))):
        if seen != expected:
            if seen < expected:
                report.lost += expected - seen
            else:
                report.half_applied += seen - expected
            report.problem(f"run {run}: {seen} {what}, expected {expected}")
    report.final_nodes = len(graph)
    return True


def _adopt(graph: SoulGraph, node_id: str, model: Model) -> None:
    """Take the file's version of a node into the model, so a fault is counted once."""
    node = graph.nodes[node_id]
    if node_id not in model.crash:
        model.order.append(node_id)
    model.crash[node_id] = _Crash(node.content, frozenset(graph.parents[node_id]))


def _check(path: Path, config: CrashConfig, model: Model, report: CrashReport, run: int) -> None:
    verdict = run_check(path, config.check_timeout)
    report.checks += 1
    expected_nodes = model.prepared.nodes + len(model.crash)
    if verdict.get("ok") is not True or verdict["exit_code"] != 0 or verdict.get("nodes") != expected_nodes:
        report.check_failures += 1
        report.problem(f"run {run}: check says {json.dumps(verdict)[:400]} (expected {expected_nodes} nodes)")
    if _reported(verdict, "torn_tail_bytes", "torn_tail_bytes") > 0:
        report.torn_tails += 1
    report.max_journal_records = max(report.max_journal_records, _reported(verdict, "journal_records", "records"))


def _reported(verdict: dict[str, Any], flat: str, nested: str) -> int:
    """A number from the check's report, at the top level or under "journal"."""
    journal = verdict.get("journal")
    value = verdict.get(flat, journal.get(nested) if isinstance(journal, dict) else None)
    return int(value or 0)
