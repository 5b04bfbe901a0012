"""A model-based test of the store: hypothesis drives two `SoulFile`s on one soul.json (two
processes, as Hermes' CLI and gateway are) and a plain reference model through every change
the runtime makes, with an I/O failure (ENOSPC, EIO, EROFS, once or from then on) or a crash
injected at any write, fsync, rename or unlink of the store (tests/faulty_io.py), and now and
then a complete journal record damaged on the disk.

After every step:
- what a fresh process loads from disk is the model's acknowledged state, and so is what each
  live process holds (a refused change is in neither);
- a change cut short by a crash is there whole or not at all;
- `python -m soulgraph.store check` passes;
- the text of every acknowledged hard forget is in no file of the store.

The model is plain dicts, written from the documented meaning of each change, not from the
engine's code. Crashes are process deaths (the page cache survives), not power cuts.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from hypothesis import HealthCheck, Phase, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from soulgraph.engine.graph import SoulGraph
from soulgraph.engine.load import load_graph
from soulgraph.memory import lifecycle
from soulgraph.store import ChangeKept, ForgetIncomplete, SoulFile, SoulFileError
from soulgraph.store import __main__ as store_cli
from soulgraph.store.journal import decode_line
from tests.faulty_io import Crash, FaultPlan, installed

# At the defaults the test holds itself to at least 10,000 changes tried. Longer runs:
# SOULGRAPH_MODEL_RUNS=2000 (and SOULGRAPH_MODEL_NO_SHRINK=1 to report a failure at once).
# Hypothesis draws a different number of steps per run from one machine to the next (9,546 and
# 10,819 changes in 150 runs seen): 180 runs keep the 10,000 the issue asks for with a margin.
DEFAULT_RUNS, DEFAULT_STEPS = 180, 120
RUNS = int(os.environ.get("SOULGRAPH_MODEL_RUNS", DEFAULT_RUNS))
STEPS = int(os.environ.get("SOULGRAPH_MODEL_STEPS", DEFAULT_STEPS))
STEPS_TAKEN: list[int] = []

ERRNOS = (errno.ENOSPC, errno.EIO, errno.EROFS)
RAM_FOLDER = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


@dataclass(frozen=True)
class Memory:
    content: str
    tags: frozenset = frozenset()
    pinned: bool = False
    status: str = "active"
    parents: frozenset = frozenset()
    access_count: int = 0
    importance: float = 0.5


@dataclass(frozen=True)
class Model:
    memories: dict  # id -> Memory
    hypotheses: dict  # id -> (content, parents)

    def with_memory(self, node_id: str, memory: Memory) -> "Model":
        return replace(self, memories={**self.memories, node_id: memory})

    def edit(self, node_id: str, **fields: Any) -> "Model":
        return self.with_memory(node_id, replace(self.memories[node_id], **fields))

    def descendants(self, node_id: str) -> set[str]:
        found, frontier = set(), [node_id]
        while frontier:
            current = frontier.pop()
            for other, memory in self.memories.items():
                if current in memory.parents and other not in found:
                    found.add(other)
                    frontier.append(other)
        return found


def view(graph: SoulGraph) -> Model:
    """A graph as the model sees it."""
    memories = {node_id: Memory(node.content, frozenset(node.tags), node.pinned, node.status,
                                frozenset(graph.parents[node_id]), node.access_count, node.importance)
                for node_id, node in graph.nodes.items()}
    hypotheses = {node_id: (node.content, frozenset(graph.branch_parents.get(node_id, ())))
                  for node_id, node in graph.branch.items()}
    return Model(memories, hypotheses)


faults = st.one_of(
    st.none(), st.none(), st.none(),
    st.tuples(st.just("error"), st.integers(0, 14), st.sampled_from(ERRNOS), st.booleans()),
    st.tuples(st.just("crash"), st.integers(0, 14), st.just(0), st.just(False)),
)
texts = st.text(alphabet="abcdefghij klmnop", min_size=1, max_size=400).map(str.strip).filter(bool)


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        # On a RAM file system where there is one: the test is about what the store does at
        # each call, not about the disk's speed, and fsyncs there cost nothing.
        self.folder = Path(tempfile.mkdtemp(prefix="soul-model-", dir=RAM_FOLDER))
        self.path = self.folder / "soul.json"
        self.now = 1_000_000.0
        self.model = Model({}, {})
        self.plan = FaultPlan(random.Random(7))
        self.souls = [self._open(), self._open()]
        self.forgotten: list[str] = []
        self.counter = 0
        self.steps = 0

    def teardown(self) -> None:
        for soul in self.souls:
            self._close(soul)
        shutil.rmtree(self.folder, ignore_errors=True)
        STEPS_TAKEN.append(self.steps)

    # ------------------------------------------------------------------ processes
    def clock(self) -> float:
        return self.now

    def _open(self) -> SoulFile:
        # A small journal limit, so compactions happen every few changes.
        return SoulFile(self.path, clock=self.clock, journal_min_bytes=2048, journal_share=0.25, lock_timeout=2)

    @staticmethod
    def _close(soul: SoulFile) -> None:
        if soul._journal_fd >= 0:
            os.close(soul._journal_fd)
            soul._journal_fd = -1

    def _unique(self, text: str) -> str:
        self.counter += 1
        return f"m{self.counter}q {text}"

    # ------------------------------------------------------------------ one change
    def _arm(self, fault) -> None:
        if fault is None:
            self.plan.disarm()
        elif fault[0] == "error":
            self.plan.fail_at(fault[1], fault[2], sticky=fault[3])
        else:
            self.plan.crash_at(fault[1])

    def _attempt(self, who: int, fault, act: Callable[[SoulFile, dict], None],
                 expect: Callable[[Model, dict], Model]) -> None:
        """Run `act` on process `who` with `fault` armed, and move the model as the outcome says:
        acknowledged → after; refused → before (in that process too); crashed → either,
        whichever the disk holds (never anything else). `act` fills in what the model needs
        (new ids; "done" once only the store's own work remains)."""
        self.steps += 1
        self.now += 1.0
        soul, before, info = self.souls[who], self.model, {}
        self._arm(fault)
        try:
            with installed(self.plan):
                act(soul, info)
        except Crash:
            self.plan.disarm()
            self._close(soul)
            self.souls[who] = self._open()  # the process was restarted
            on_disk = self._fresh()
            after = expect(before, info) if info.get("done") else None
            assert on_disk in (before, after), f"a crashed change is half there\n{on_disk}\n{before}\n{after}"
            self.model = on_disk
            return
        except ChangeKept as exc:
            # In the files, though something after it failed (a folder sync, a file that
            # still holds forgotten text): the change stands, and the error says so.
            self.plan.disarm()
            assert self.plan.fired is not None, f"{exc} with no fault injected"
            self.model = expect(before, info)
            if isinstance(exc, ForgetIncomplete):
                assert exc.path.exists() and info["forgotten"].encode() in exc.path.read_bytes(), exc
                os.unlink(exc.path)  # what the message tells the operator to do
            if "forgotten" in info:
                self.forgotten.append(info["forgotten"])
            return
        except SoulFileError as exc:
            self.plan.disarm()
            assert self.plan.fired is not None, f"refused with no fault injected: {exc}"
            assert view(soul.loaded) == before, "a refused change is still in the process that made it"
            return
        self.plan.disarm()
        self.model = expect(before, info)
        if "forgotten" in info:
            self.forgotten.append(info["forgotten"])

    def _change(self, who: int, fault, edit: Callable[[SoulGraph, dict], None], expect) -> None:
        def act(soul: SoulFile, info: dict) -> None:
            with soul.change() as graph:
                edit(graph, info)
                info["done"] = True
        self._attempt(who, fault, act, expect)

    def _fresh(self) -> Model:
        soul = self._open()
        try:
            return view(soul.graph())
        finally:
            self._close(soul)

    # ------------------------------------------------------------------ rules
    who = st.integers(0, 1)

    @rule(who=who, fault=faults, text=texts, parents=st.lists(st.integers(0, 10**6), max_size=3),
          pinned=st.booleans(), tag=st.sampled_from(["", "lesson", "fact"]))
    def add(self, who, fault, text, parents, pinned, tag):
        ids = sorted(self.model.memories)
        chosen = sorted({ids[i % len(ids)] for i in parents}) if ids else []
        content, tags = self._unique(text), [tag] if tag else []

        def edit(graph, info):
            info["id"] = graph.add(content, tags, parents=chosen, pinned=pinned).id

        self._change(who, fault, edit, lambda m, info: m.with_memory(
            info["id"], Memory(content, frozenset(tags), pinned, parents=frozenset(chosen))))

    @precondition(lambda self: len(self.model.memories) >= 2)
    @rule(who=who, fault=faults, pick=st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)))
    def link(self, who, fault, pick):
        ids = sorted(self.model.memories)
        parent, child = ids[pick[0] % len(ids)], ids[pick[1] % len(ids)]
        if parent == child or parent in self.model.descendants(child):
            return  # would close a cycle: the engine refuses it (tested elsewhere)
        self._change(who, fault, lambda graph, info: graph.link(parent, child),
                     lambda m, info: m.edit(child, parents=m.memories[child].parents | {parent}))

    @precondition(lambda self: self.model.memories)
    @rule(who=who, fault=faults, pick=st.integers(0, 10**6), kind=st.sampled_from(
        ["pin", "unpin", "splay", "tag", "importance", "archive", "confirm"]))
    def touch(self, who, fault, pick, kind):
        ids = sorted(self.model.memories)
        node_id = ids[pick % len(ids)]
        edits = {
            "pin": (lambda g: g.pin(node_id, True), {"pinned": True}),
            "unpin": (lambda g: g.pin(node_id, False), {"pinned": False}),
            "splay": (lambda g: g.splay(node_id), {"access_count": self.model.memories[node_id].access_count + 1}),
            "tag": (lambda g: g.tag(node_id, "touched"), {"tags": self.model.memories[node_id].tags | {"touched"}}),
            "importance": (lambda g: g.update(node_id, importance=0.9), {"importance": 0.9}),
            "archive": (lambda g: lifecycle.archive(g, node_id, writer="test"), {"status": "archived"}),
            "confirm": (lambda g: lifecycle.confirm(g, node_id, writer="test"), {}),
        }
        do, fields = edits[kind]
        self._change(who, fault, lambda graph, info: do(graph), lambda m, info: m.edit(node_id, **fields))

    @precondition(lambda self: len(self.model.memories) >= 2)
    @rule(who=who, fault=faults, pick=st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)))
    def supersede(self, who, fault, pick):
        ids = sorted(self.model.memories)
        old, new = ids[pick[0] % len(ids)], ids[pick[1] % len(ids)]
        if old == new or old in self.model.descendants(new) or self.model.memories[old].status == "superseded":
            return
        self._change(who, fault, lambda graph, info: lifecycle.supersede(graph, old, new, writer="test"),
                     lambda m, info: m.edit(new, parents=m.memories[new].parents | {old}).edit(old, status="superseded"))

    @precondition(lambda self: self.model.memories)
    @rule(who=who, fault=faults, pick=st.integers(0, 10**6))
    def forget(self, who, fault, pick):
        ids = sorted(self.model.memories)
        node_id = ids[pick % len(ids)]
        content = self.model.memories[node_id].content

        def edit(graph, info):
            lifecycle.forget(graph, node_id, "asked to", writer="test", force=True)
            info["forgotten"] = content

        def expect(m, info):
            memories = {i: replace(x, parents=x.parents - {node_id}) for i, x in m.memories.items() if i != node_id}
            hypotheses = {i: (text, parents - {node_id}) for i, (text, parents) in m.hypotheses.items()}
            return Model(memories, hypotheses)

        self._change(who, fault, edit, expect)

    @rule(who=who, fault=faults, text=texts, parent=st.integers(0, 10**6))
    def explore(self, who, fault, text, parent):
        ids = sorted(self.model.memories)
        parents = [ids[parent % len(ids)]] if ids else []
        content = self._unique(text)

        def edit(graph, info):
            info["id"] = graph.explore(content, parents=parents).id

        self._change(who, fault, edit, lambda m, info: replace(
            m, hypotheses={**m.hypotheses, info["id"]: (content, frozenset(parents))}))

    @precondition(lambda self: self.model.hypotheses)
    @rule(who=who, fault=faults, pick=st.integers(0, 10**6))
    def promote(self, who, fault, pick):
        ids = sorted(self.model.hypotheses)
        node_id = ids[pick % len(ids)]
        content, parents = self.model.hypotheses[node_id]
        kept = frozenset(p for p in parents if p in self.model.memories)

        def expect(m, info):
            hypotheses = {i: h for i, h in m.hypotheses.items() if i != node_id}
            return replace(m, hypotheses=hypotheses).with_memory(node_id, Memory(content, parents=kept))

        self._change(who, fault, lambda graph, info: graph.promote(node_id), expect)

    @rule(who=who, fault=faults)
    def compact(self, who, fault):
        def act(soul: SoulFile, info: dict) -> None:
            info["done"] = True
            soul.compact()

        self._attempt(who, fault, act, lambda m, info: m)

    @rule(who=who, fault=faults, text=texts)
    def save(self, who, fault, text):
        """Replace the whole graph (a re-seed): everything as it is, plus one memory."""
        content = self._unique(text)

        def act(soul: SoulFile, info: dict) -> None:
            graph = soul.graph()
            fresh = load_graph([graph.record(i) for i in graph.nodes], next_id=graph.next_id,
                               exploration={"nodes": graph.branch_records()}, clock=self.clock)
            info["id"], info["done"] = fresh.add(content).id, True
            soul.save(fresh)

        self._attempt(who, fault, act, lambda m, info: m.with_memory(info["id"], Memory(content)))

    @rule(who=who)
    def restart(self, who):
        self._close(self.souls[who])
        self.souls[who] = self._open()

    @precondition(lambda self: self.path.exists())
    @rule(byte=st.integers(0, 10**6))
    def damage_the_last_record(self, byte):
        """A complete last record that no longer verifies is damage, not a torn write: every
        reader refuses the journal, and it is left as it was."""
        journal = self.souls[0].journal_path
        try:
            data = journal.read_bytes()
        except FileNotFoundError:
            return
        lines = data.split(b"\n")
        if len(lines) < 3 or lines[-1] or decode_line(lines[-2]) is None or "seq" not in decode_line(lines[-2]):
            return  # no complete change record at the end
        record = lines[-2]
        at = 9 + byte % (len(record) - 9)
        lines[-2] = record[:at] + (b"#" if record[at:at + 1] != b"#" else b"%") + record[at + 1:]
        journal.write_bytes(b"\n".join(lines))
        try:
            report = store_cli.check(self.path)
            assert not report["ok"] and "damaged record" in report["problem"], report
            reader = self._open()
            try:
                reader.graph()
                raise AssertionError("a damaged last record was read as a torn tail")
            except SoulFileError as exc:
                assert "damaged record" in str(exc)
            finally:
                self._close(reader)
            assert journal.read_bytes() == b"\n".join(lines), "the damaged journal was changed"
        finally:
            journal.write_bytes(data)

    # ------------------------------------------------------------------ after every step
    @invariant()
    def disk_and_processes_hold_the_model(self):
        assert self._fresh() == self.model, "what loads from disk is not what was acknowledged"
        for soul in self.souls:
            assert view(soul.graph()) == self.model, "a live process does not hold what was acknowledged"

    @invariant()
    def check_passes(self):
        if self.path.exists():
            report = store_cli.check(self.path)
            assert report["ok"], report

    @invariant()
    def forgotten_text_is_in_no_file(self):
        if not self.forgotten:
            return
        for path in self.folder.iterdir():
            data = path.read_bytes()
            for text in self.forgotten:
                assert text.encode() not in data, f"{path.name} still holds forgotten {text[:20]!r}"


def test_the_store_holds_to_its_model_under_faults_and_crashes():
    phases = [Phase.generate] if os.environ.get("SOULGRAPH_MODEL_NO_SHRINK") else list(Phase)
    STEPS_TAKEN.clear()
    run_state_machine_as_test(StoreMachine, settings=settings(
        max_examples=RUNS, stateful_step_count=STEPS, deadline=None, derandomize=True, phases=phases,
        suppress_health_check=list(HealthCheck), database=None))
    print(f"store model: {len(STEPS_TAKEN)} runs, {sum(STEPS_TAKEN)} changes tried")
    if (RUNS, STEPS) == (DEFAULT_RUNS, DEFAULT_STEPS):
        assert sum(STEPS_TAKEN) >= 10_000, "the issue asks for at least 10,000 steps in CI"
