"""Replay a ledger through a soul graph at the ledger's own timestamps.

Events, in time order (ties: creations, then late edges, then updates; then file order):

- creation of task X at its created_at. First, with the clock at that moment and X
  not yet in memory, every method is asked X's title once; the ranking answers two
  questions, each asked only when its answer key is not empty:
    built on    — X's deps that already exist;
    waiting on  — existing tasks that declared a dependency on X before X existed
                  (when: `meta.dep_declared_at`, else the dependant's created_at).
  Then X becomes a node tagged `project:<p>`, its existing deps become edges dep -> X
  and are touched (splayed) at that moment, and its waiting dependants get X -> Y.
- a late edge X -> Y, when Y declared its dependency on X only after X existed:
  added at the declaration time, so the graph never knows an edge before it was made.
- an update of X at each `updated_at`: X is touched.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from soulgraph.eval.ledger import Ledger, Task
from soulgraph.eval.retrievers import make_retrievers
from soulgraph.eval.scoring import Question
from soulgraph.engine.graph import CycleError, SoulGraph

CREATE, LINK, UPDATE = 0, 1, 2
# Graph sizes at which per-question latency is reported separately, to show growth.
SIZE_BUCKETS = (1_000, 5_000, 10_000, 20_000, 30_000, 40_000, 50_000)


@dataclass
class ReplayResult:
    methods: list[str]
    depth: int  # how many ids each method was asked for
    questions: list[Question]
    latencies: dict[str, list[float]]  # method -> seconds per ask
    sizes: list[int]  # graph size (nodes) at each ask, aligned with each latency list
    stats: Counter = field(default_factory=Counter)
    seconds: float = 0.0  # the whole replay, wall clock
    engine_seconds: float = 0.0  # adding nodes and edges, touching
    declared_at: str = "meta"


class _Clock:
    """The replay's clock: the graph reads `now`, the replay moves it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _events(tasks: list[Task], declared) -> list[tuple]:
    position = {task.id: i for i, task in enumerate(tasks)}
    events = []
    for task in tasks:
        events.append((task.created_at, CREATE, task.order, task))
        for moment in task.updated_at:
            events.append((moment, UPDATE, task.order, task))
        for dep in task.deps:
            if position[dep] > position[task.id]:  # the dep is newer: a waiting-on pair
                newer = tasks[position[dep]]
                when = declared(task, dep)
                if when > newer.created_at:
                    events.append((when, LINK, task.order, (dep, task.id)))
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    return events


def replay_ledger(ledger: Ledger, methods: list[str], depth: int = 10, use_declared_at: bool = True) -> ReplayResult:
    def declared(dependant: Task, dep: str) -> float:
        if use_declared_at and dep in dependant.dep_declared_at:
            return dependant.dep_declared_at[dep]
        return dependant.created_at

    tasks = ledger.tasks
    by_id = {task.id: task for task in tasks}
    dependants: dict[str, list[Task]] = {}
    for task in tasks:
        for dep in task.deps:
            dependants.setdefault(dep, []).append(task)

    clock = _Clock()
    graph = SoulGraph(clock=clock)
    retrievers = make_retrievers(methods, graph)
    result = ReplayResult(methods, depth, [], {m: [] for m in methods}, [],
                          declared_at="meta.dep_declared_at" if use_declared_at else "created_at")
    stats = result.stats
    engine = 0.0
    started = time.perf_counter()

    def link(parent: str, child: str) -> None:
        try:
            if graph.link(parent, child):
                stats["edges"] += 1
        except CycleError:
            stats["edges refused (cycle)"] += 1

    def touch(node_id: str, at: float) -> None:
        graph.splay(node_id, at=at)
        for retriever in retrievers:
            retriever.observe_touch(node_id, at)

    for moment, kind, _order, payload in _events(tasks, declared):
        clock.now = moment
        if kind == UPDATE:
            t0 = time.perf_counter()
            touch(payload.id, moment)
            engine += time.perf_counter() - t0
            stats["updates"] += 1
            continue
        if kind == LINK:
            t0 = time.perf_counter()
            link(*payload)
            engine += time.perf_counter() - t0
            stats["late edges"] += 1
            continue

        task: Task = payload
        built_on = [dep for dep in task.deps if dep in graph]
        waiting = [y for y in dependants.get(task.id, ()) if y.id in graph and declared(y, task.id) <= moment]
        asked = []
        if built_on:
            asked.append(Question("built_on", task.id, moment, {d: by_id[d].created_at for d in built_on}))
        if waiting:
            asked.append(Question("waiting_on", task.id, moment, {y.id: y.created_at for y in waiting}))
        if asked:
            size = len(graph)
            result.sizes.append(size)
            for retriever in retrievers:
                t0 = time.perf_counter()
                ranked = retriever.ask(task.title, depth)
                result.latencies[retriever.name].append(time.perf_counter() - t0)
                for question in asked:
                    question.record(retriever.name, ranked)
            result.questions.extend(asked)

        t0 = time.perf_counter()
        tags = [f"project:{task.project}"] if task.project else []
        graph.add(task.title, tags, node_id=task.id, created_at=moment)
        for retriever in retrievers:
            retriever.observe_add(task.id, task.title, moment)
        stats["tasks"] += 1
        for dep in built_on:
            link(dep, task.id)
            touch(dep, moment)
        for dependant in waiting:
            link(task.id, dependant.id)
        engine += time.perf_counter() - t0

    result.seconds = time.perf_counter() - started
    result.engine_seconds = engine
    stats["asks"] = len(result.sizes)
    return result
