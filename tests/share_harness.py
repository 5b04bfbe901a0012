"""Two real MCP servers on one soul.json: does each see the other's writes, and at what rate?

Used by tests/test_store_sharing.py (short run) and bench/bench_store.py share (long run,
with the same workload against one server alone as the baseline).

Hermes' CLI and gateway each start `python -m soulgraph.mcp` on the same soul.json. The
driver here is the only writer, so it keeps an exact model of what the file must hold.
Operations go to the servers in turn. Every write (soul_add with parents, soul_link,
soul_pin, soul_splay) is followed by a read on the *other* server that must already show
it (else a stale read). Plain reads (soul_query, soul_related, soul_hot, soul_discover,
soul_summary) make up the rest; those whose answer the model knows are checked too. At the
end both servers and a fresh load of the file must agree with the model on every node
and edge (else lost writes).

Concurrent mode (`ShareConfig(concurrent=True)`): two driver coroutines run at once
(asyncio.gather), one per server (or both on one server, for the baseline), each sending its
own stream of operations as fast as its server answers: 70% writes (soul_add, soul_link,
soul_pin, soul_splay), all on nodes that driver added itself (or on prepared nodes as
parents), so each driver's model of its own nodes stays exact without locking; 30% reads,
across both drivers' nodes. Both drivers live on one event loop, so one counter orders every
event: a write is stamped when sent and when acknowledged, a read when sent and when its
answer is back. A read of a node must show a state at least as new as the last one
acknowledged before the read was sent (else a stale read), and no state that was not
written by then (else a wrong read). soul_query / soul_prime on a node's unique word check
its parents, pin and use count; soul_discover checks its children; soul_summary checks the
counts against the range the acknowledged and in-flight writes allow. At the end both
servers and a fresh load of the file must agree with the merged model node by node and edge
by edge, as in the sequential mode.

Every wait has a timeout, so a hung server fails the run instead of hanging it; every loop
is bounded by a count and by `ShareConfig.seconds`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import os
import random
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.crash_harness import open_soul, prepare, synthetic

SHARE_TAG = "share"
WRITES: tuple[tuple[str, float], ...] = (("add", 0.4), ("link", 0.2), ("pin", 0.15), ("splay", 0.25))
READS = ("soul_query", "soul_related", "soul_hot", "soul_discover", "soul_summary")
# Reads of the concurrent mode: (tool, share). soul_query and soul_prime look a node up by its
# unique word; soul_hot and soul_related are not checked (their answer depends on timing).
CONCURRENT_READS: tuple[tuple[str, float], ...] = (
    ("soul_query", 0.3), ("soul_prime", 0.2), ("soul_discover", 0.15), ("soul_summary", 0.1),
    ("soul_hot", 0.1), ("soul_related", 0.15))


class ServerError(Exception):
    """A tool call that should have worked was refused."""


@dataclasses.dataclass
class ShareConfig:
    servers: int = 2
    ops: int = 2000  # workload calls, all drivers together
    concurrent: bool = False  # two drivers at once (one per server when servers == 2)
    drivers: int = 2  # in the concurrent mode
    # concurrent: share of node reads that first wait for the other driver's write in flight to
    # be acknowledged, then read that node at once (else a driver sends its next call the moment
    # its previous answer is in, so what it checks was mostly acknowledged before that answer)
    follow_share: float = 0.5
    seconds: float = 600.0  # stop early after this long, whatever `ops` says
    write_share: float = 0.7
    seed: int = 5
    call_timeout: float = 60.0
    start_timeout: float = 120.0
    final_timeout: float = 600.0


@dataclasses.dataclass
class ShareReport:
    servers: int = 0
    concurrent: bool = False
    nodes: int = 0
    ops: int = 0
    writes: int = 0
    reads: int = 0
    # sequential: reads after a write, on the other server (extra calls);
    # concurrent: reads of a node the other driver wrote, checked (part of the reads)
    checks: int = 0
    # concurrent: checks of a write acknowledged after the reading driver's previous answer, so
    # its server can know the write only by reading the journal while it answers this read
    fresh: int = 0
    racing: int = 0  # concurrent: checks sent while the other driver's write to that node was in flight
    most_in_flight: int = 0  # concurrent: the most calls waiting for an answer at once
    stale: int = 0
    wrong: int = 0  # concurrent: a read showed a state nobody had written (yet)
    lost: int = 0
    errors: int = 0
    seconds: float = 0.0
    # CPU seconds used while timed (Linux; 0 elsewhere): by the driving process (MCP clients,
    # model, checks), by its servers, and by every other process on the machine
    driver_cpu: float = 0.0
    servers_cpu: float = 0.0
    others_cpu: float = 0.0
    by_kind: dict[str, int] = dataclasses.field(default_factory=dict)
    problems: list[str] = dataclasses.field(default_factory=list)

    def problem(self, text: str) -> None:
        if len(self.problems) < 50:
            self.problems.append(text)

    @property
    def ops_per_second(self) -> float:
        return self.ops / self.seconds if self.seconds else 0.0

    @property
    def writes_per_second(self) -> float:
        return self.writes / self.seconds if self.seconds else 0.0

    @property
    def calls(self) -> int:
        """Every tool call in the timed part: the concurrent mode's checks are reads, not extra calls."""
        return self.ops if self.concurrent else self.ops + self.checks

    @property
    def calls_per_second(self) -> float:
        return self.calls / self.seconds if self.seconds else 0.0

    @property
    def ok(self) -> bool:
        return self.stale == self.wrong == self.lost == self.errors == 0


@dataclasses.dataclass
class _Version:
    """One state of a node (concurrent mode): what a write made of it, when it was sent
    and when acknowledged (ticks of the run's one counter)."""

    parents: frozenset[str]
    pinned: bool
    access: int
    sent: int
    acked: int | None = None  # None: in flight


@dataclasses.dataclass
class _Made:
    """A node the driver added: its unique word finds it on any server. Its fields hold the
    last acknowledged state; `history` (concurrent mode) every state since it was added."""

    number: int
    word: str
    content: str
    parents: set[str]
    pinned: bool = False
    access: int = 0
    owner: int = 0
    history: list[_Version] = dataclasses.field(default_factory=list)


def _cpu_snapshot() -> tuple[float, float, float]:
    """(this process, its child processes, the whole machine busy): CPU seconds so far, read
    from /proc; zeros where there is none. The bench's machine is shared, so a row reports
    how much of it other processes took."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    me = os.getpid()
    children = 0.0
    try:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue  # gone meanwhile
            if int(fields[1]) == me:
                children += (int(fields[11]) + int(fields[12])) / tick
        with open("/proc/stat") as handle:
            cpu = [int(v) for v in handle.readline().split()[1:]]
        busy = (sum(cpu[:8]) - cpu[3] - cpu[4]) / tick  # all but idle and iowait
    except (OSError, ValueError, IndexError):
        return 0.0, 0.0, 0.0
    return time.process_time(), children, busy


def _number(node_id: str) -> int:
    return int(node_id.lstrip("n"))


def server_params(soul_file: Path) -> StdioServerParameters:
    """The server as Hermes starts it, with our whole environment (the SDK passes only a few
    variables by default), so it imports the same soulgraph as the fresh load that checks it."""
    return StdioServerParameters(command=sys.executable, args=["-m", "soulgraph.mcp", "--soul-file", str(soul_file)],
                                 env=dict(os.environ))


class Driver:
    """The workload and the model of what the file must hold."""

    def __init__(self, soul_file: Path, config: ShareConfig, report: ShareReport):
        self.soul_file, self.config, self.report = soul_file, config, report
        self.rng = random.Random(config.seed)
        graph = open_soul(soul_file).graph()
        self.prepared = {node_id: (node.content, frozenset(graph.parents[node_id]), node.pinned, node.access_count)
                         for node_id, node in graph.nodes.items()}
        self.prepared_ids = sorted(self.prepared, key=_number)
        self.prepared_edges = sum(1 for _ in graph.edges())
        self.prepared_pins = len(graph.pinned)
        self.made: dict[str, _Made] = {}
        self.made_ids: list[str] = []
        self.questions = synthetic.questions(200, seed=config.seed)

    # ------------------------------------------------------------------ calls
    async def call(self, client: Client, name: str, **arguments: Any) -> dict[str, Any]:
        async with asyncio.timeout(self.config.call_timeout):
            result = await client.call_tool(name, arguments)
        if result.is_error:
            raise ServerError(f"{name}({arguments}) refused: {result.content[0].text}")
        return result.structured_content

    def stale(self, text: str) -> None:
        self.report.stale += 1
        self.report.problem(text)

    # ------------------------------------------------------------------ model
    def totals(self) -> tuple[int, int, int]:
        nodes = len(self.prepared) + len(self.made)
        edges = self.prepared_edges + sum(len(m.parents) for m in self.made.values())
        pins = self.prepared_pins + sum(m.pinned for m in self.made.values())
        return nodes, edges, pins

    def any_node(self) -> str:
        if self.made_ids and self.rng.random() < 0.5:
            return self.rng.choice(self.made_ids)
        return self.rng.choice(self.prepared_ids)

    def older_than(self, node_id: str) -> str:
        """A node added before `node_id`: an edge from it can never close a cycle, since
        every edge here runs from a smaller id to a larger one."""
        limit = _number(node_id)
        older = [m for m in self.made_ids if _number(m) < limit]
        if older and self.rng.random() < 0.5:
            return self.rng.choice(older)
        return self.rng.choice(self.prepared_ids)

    # ------------------------------------------------------------------ writes
    async def write(self, here: Client, there: Client) -> None:
        roll, kind = self.rng.random(), "add"
        if self.made_ids:
            for name, share in WRITES:
                if roll < share:
                    kind = name
                    break
                roll -= share
        self.report.writes += 1
        self.report.by_kind[kind] = self.report.by_kind.get(kind, 0) + 1
        await getattr(self, f"write_{kind}")(here, there)
        self.report.checks += 1

    async def find(self, client: Client, node_id: str) -> dict[str, Any] | None:
        """The node as a server's search shows it, found by its unique word."""
        results = (await self.call(client, "soul_query", query=self.made[node_id].word, limit=1))["results"]
        return results[0] if results and results[0]["id"] == node_id else None

    def same(self, node_id: str, seen: dict[str, Any] | None) -> bool:
        made = self.made[node_id]
        return (seen is not None and seen["content"] == made.content and seen["parents"] == sorted(made.parents)
                and seen["pinned"] == made.pinned)

    async def write_add(self, here: Client, there: Client) -> None:
        parents = sorted({self.any_node() for _ in range(self.rng.choice((1, 1, 2)))}, key=_number)
        word = f"shared{len(self.made) + 1}word{self.config.seed}"
        content = f"{word} {synthetic.sentence(self.rng, 6)}"
        node = await self.call(here, "soul_add", content=content, tags=[SHARE_TAG], parents=parents)
        self.made[node["id"]] = _Made(_number(node["id"]), word, content, set(parents))
        self.made_ids.append(node["id"])
        if node["parents"] != sorted(parents):
            self.stale(f"soul_add {node['id']} answered parents {node['parents']}, asked {parents}")
        if not self.same(node["id"], await self.find(there, node["id"])):
            self.stale(f"the other server does not show the new node {node['id']}")

    async def write_link(self, here: Client, there: Client) -> None:
        child = self.rng.choice(self.made_ids)
        parent = self.older_than(child)
        expected_already = parent in self.made[child].parents
        answer = await self.call(here, "soul_link", parent_id=parent, child_id=child)
        self.made[child].parents.add(parent)
        if answer["already_linked"] != expected_already:
            self.stale(f"soul_link {parent}->{child} said already_linked={answer['already_linked']}")
        if not self.same(child, await self.find(there, child)):
            self.stale(f"the other server does not show the edge {parent}->{child}")

    async def write_pin(self, here: Client, there: Client) -> None:
        node_id = self.rng.choice(self.made_ids)
        want = not self.made[node_id].pinned
        answer = await self.call(here, "soul_pin", node_id=node_id, pinned=want)
        self.made[node_id].pinned = want
        if answer["pinned"] != want:
            self.stale(f"soul_pin {node_id} answered pinned={answer['pinned']}")
        if not self.same(node_id, await self.find(there, node_id)):
            self.stale(f"the other server does not show {node_id} pinned={want}")

    async def write_splay(self, here: Client, there: Client) -> None:
        node_id = self.rng.choice(self.made_ids)
        made = self.made[node_id]
        answer = await self.call(here, "soul_splay", node_id=node_id)
        made.access += 1
        if answer["access_count"] != made.access:
            self.stale(f"soul_splay {node_id} answered access_count={answer['access_count']}, expected {made.access}")
        if await self.access_seen(there, node_id) != made.access:
            self.stale(f"the other server does not show {node_id} used {made.access} times")

    async def access_seen(self, client: Client, node_id: str) -> int | None:
        """How often a server thinks a node was used: soul_prime's focus carries the count."""
        focus = (await self.call(client, "soul_prime", context=self.made[node_id].word, limit=1))["focus"]
        return focus["access_count"] if focus and focus["id"] == node_id else None

    # ------------------------------------------------------------------ reads
    async def read(self, here: Client) -> None:
        name = self.rng.choice(READS)
        self.report.reads += 1
        self.report.by_kind[name] = self.report.by_kind.get(name, 0) + 1
        if name in ("soul_query", "soul_related"):
            await self.call(here, name, query=self.rng.choice(self.questions))
        elif name == "soul_hot":
            await self.call(here, name, limit=10)
        elif name == "soul_discover" and self.made_ids:
            start = self.rng.choice(self.made_ids)
            found = await self.call(here, name, node_id=start, depth=1, limit=100)
            children = sorted((c for c, m in self.made.items() if start in m.parents), key=_number)
            if sorted((r["id"] for r in found["results"]), key=_number) != children:
                self.stale(f"soul_discover {start} shows {[r['id'] for r in found['results']]}, expected {children}")
        else:
            summary = await self.call(here, "soul_summary")
            if (summary["nodes"], summary["edges"], summary["pinned"]) != self.totals():
                self.stale(f"soul_summary counts {(summary['nodes'], summary['edges'], summary['pinned'])}, "
                           f"expected {self.totals()}")

    # ------------------------------------------------------------------ the end
    async def verify_server(self, client: Client, name: str) -> set[str]:
        """Everything the driver wrote, as one server shows it. Returns ids it gets wrong."""
        wrong: set[str] = set()
        summary = await self.call(client, "soul_summary")
        if (summary["nodes"], summary["edges"], summary["pinned"]) != self.totals():
            self.report.lost += 1
            self.report.problem(f"{name}: counts {(summary['nodes'], summary['edges'], summary['pinned'])}, "
                                f"expected {self.totals()}")
        for node_id, made in self.made.items():
            if not self.same(node_id, await self.find(client, node_id)):
                wrong.add(node_id)
                self.report.problem(f"{name}: {node_id} is not as written")
            elif made.access and await self.access_seen(client, node_id) != made.access:
                wrong.add(node_id)
                self.report.problem(f"{name}: {node_id} does not show its {made.access} uses")
        return wrong

    def verify_file(self) -> set[str]:
        """Every node and edge of a fresh load of the file against the model."""
        graph = open_soul(self.soul_file).graph()
        wrong: set[str] = set()
        expected = dict(self.prepared)
        for node_id, made in self.made.items():
            expected[node_id] = (made.content, frozenset(made.parents), made.pinned, made.access)
        for node_id, (content, parents, pinned, access) in expected.items():
            node = graph.nodes.get(node_id)
            if node is None or (node.content, frozenset(graph.parents[node_id]), node.pinned, node.access_count) \
                    != (content, parents, pinned, access):
                wrong.add(node_id)
                self.report.problem(f"file: {node_id} is not as written")
        extra = graph.nodes.keys() - expected.keys()
        if extra:
            wrong |= extra
            self.report.problem(f"file: nodes nobody wrote: {sorted(extra)[:5]}")
        edges = sum(1 for _ in graph.edges())
        if edges != self.totals()[1]:
            self.report.lost += 1
            self.report.problem(f"file: {edges} edges, expected {self.totals()[1]}")
        return wrong


# ---------------------------------------------------------------------------- concurrent mode
def _pick(rng: random.Random, table: tuple[tuple[str, float], ...]) -> str:
    roll = rng.random()
    for name, share in table:
        if roll < share:
            return name
        roll -= share
    return table[-1][0]


class Lane:
    """One driver of the concurrent mode: its own server, its own nodes, its own stream of
    operations. Writes touch only nodes this lane added (prepared nodes serve as parents),
    so its model of them is exact; reads go to nodes of every lane."""

    def __init__(self, driver: Driver, index: int, client: Client, lanes: list[Lane], ticks: Iterator[int],
                 flight: list[int]):
        self.driver, self.index, self.client, self.lanes = driver, index, client, lanes
        self.config, self.report = driver.config, driver.report
        self.rng = random.Random(f"{driver.config.seed}:lane{index}")
        self.ticks, self.flight = ticks, flight
        self.made_ids: list[str] = []  # nodes this lane added, in order
        self.adding: tuple[frozenset[str], int] | None = None  # an add in flight: its parents, sent tick
        self.last_written: str | None = None  # the node of this lane's last acknowledged write
        self.last_answer = 0  # tick: when this lane's server last answered
        self.writing: asyncio.Future[str | None] | None = None  # the write in flight: its node, once acknowledged
        self.acked_node: str | None = None  # the node the write in flight changed, once acknowledged
        self.previous_answer = 0  # tick: the last answer before the read being judged was sent

    # ------------------------------------------------------------------ calls
    async def call(self, name: str, **arguments: Any) -> dict[str, Any]:
        self.flight[0] += 1
        self.report.most_in_flight = max(self.report.most_in_flight, self.flight[0])
        try:
            answer = await self.driver.call(self.client, name, **arguments)
        finally:
            self.flight[0] -= 1
        self.last_answer = self.tick()
        return answer

    def tick(self) -> int:
        return next(self.ticks)

    def owner(self, node_id: str) -> Lane:
        return self.lanes[self.driver.made[node_id].owner]

    # ------------------------------------------------------------------ the run
    async def run(self, ops: int, deadline: float) -> None:
        for _ in range(ops):
            if time.monotonic() > deadline:
                break
            try:
                if self.rng.random() < self.config.write_share:
                    await self.write()
                else:
                    await self.read()
            except ServerError as exc:
                self.report.errors += 1
                self.report.problem(f"lane {self.index}: {exc}")
            self.report.ops += 1

    # ------------------------------------------------------------------ writes
    def own_or_prepared(self) -> str:
        if self.made_ids and self.rng.random() < 0.5:
            return self.rng.choice(self.made_ids)
        return self.rng.choice(self.driver.prepared_ids)

    def older_than(self, node_id: str) -> str:
        """One of this lane's nodes added before `node_id`, or a prepared node: every edge
        runs from a smaller id to a larger one, so no edge closes a cycle."""
        limit = _number(node_id)
        older = [m for m in self.made_ids if _number(m) < limit]
        if older and self.rng.random() < 0.5:
            return self.rng.choice(older)
        return self.rng.choice(self.driver.prepared_ids)

    async def write(self) -> None:
        kind = _pick(self.rng, WRITES) if self.made_ids else "add"
        self.report.writes += 1
        self.report.by_kind[kind] = self.report.by_kind.get(kind, 0) + 1
        self.writing, self.acked_node = asyncio.get_running_loop().create_future(), None
        try:
            await getattr(self, f"write_{kind}")()
        finally:
            writing, self.writing = self.writing, None
            # Followers wake once the model holds the acknowledged state (None: refused).
            writing.set_result(self.acked_node)

    def wrong(self, text: str) -> None:
        self.report.wrong += 1
        self.report.problem(f"lane {self.index}: {text}")

    async def write_add(self) -> None:
        parents = sorted({self.own_or_prepared() for _ in range(self.rng.choice((1, 1, 2)))}, key=_number)
        word = f"shared{self.index}x{len(self.made_ids) + 1}word{self.config.seed}"
        content = f"{word} {synthetic.sentence(self.rng, 6)}"
        self.adding = (frozenset(parents), self.tick())
        try:
            node = await self.call("soul_add", content=content, tags=[SHARE_TAG], parents=parents)
        finally:
            sent, self.adding = self.adding[1], None
        version = _Version(frozenset(parents), False, 0, sent, self.tick())
        node_id = node["id"]
        if node_id in self.driver.made or node_id in self.driver.prepared:
            self.wrong(f"soul_add answered {node_id}, an id already taken")
            return
        self.driver.made[node_id] = _Made(_number(node_id), word, content, set(parents), owner=self.index,
                                          history=[version])
        self.driver.made_ids.append(node_id)
        self.made_ids.append(node_id)
        self.last_written = self.acked_node = node_id
        if node["parents"] != sorted(parents) or node["pinned"] or node["access_count"] != 0:
            self.wrong(f"soul_add {node_id} answered parents {node['parents']} pinned {node['pinned']} "
                       f"access {node['access_count']}, asked parents {parents}")

    async def _change(self, target: str, tool: str, *, to_parents: frozenset[str] | None = None,
                      to_pinned: bool | None = None, to_access: int | None = None,
                      **arguments: Any) -> dict[str, Any]:
        """Send a write to one of our nodes; its new state joins the history when sent (it
        may show from then on) and counts as acknowledged once the answer is back."""
        made = self.driver.made[target]
        version = _Version(frozenset(made.parents) if to_parents is None else to_parents,
                           made.pinned if to_pinned is None else to_pinned,
                           made.access if to_access is None else to_access, self.tick())
        made.history.append(version)
        try:
            answer = await self.call(tool, **arguments)
        except BaseException:
            made.history.remove(version)  # refused: never made (a timeout fails the run anyway)
            raise
        version.acked = self.tick()
        made.parents, made.pinned, made.access = set(version.parents), version.pinned, version.access
        self.last_written = self.acked_node = target
        return answer

    async def write_link(self) -> None:
        child = self.rng.choice(self.made_ids)
        parent = self.older_than(child)
        made = self.driver.made[child]
        expected_already = parent in made.parents
        answer = await self._change(child, "soul_link", to_parents=frozenset(made.parents | {parent}),
                                    parent_id=parent, child_id=child)
        if answer["already_linked"] != expected_already:
            self.wrong(f"soul_link {parent}->{child} said already_linked={answer['already_linked']}")

    async def write_pin(self) -> None:
        node_id = self.rng.choice(self.made_ids)
        want = not self.driver.made[node_id].pinned
        answer = await self._change(node_id, "soul_pin", to_pinned=want, node_id=node_id, pinned=want)
        if answer["pinned"] != want or answer["parents"] != sorted(self.driver.made[node_id].parents):
            self.wrong(f"soul_pin {node_id} answered pinned={answer['pinned']} parents {answer['parents']}")

    async def write_splay(self) -> None:
        node_id = self.rng.choice(self.made_ids)
        access = self.driver.made[node_id].access + 1
        answer = await self._change(node_id, "soul_splay", to_access=access, node_id=node_id)
        if answer["access_count"] != access:
            self.wrong(f"soul_splay {node_id} answered access_count={answer['access_count']}, expected {access}")

    # ------------------------------------------------------------------ reads
    async def read_target(self) -> str | None:
        """The node a read looks at. Now and then (`follow_share`) wait for another lane's
        write in flight and take its node the moment it is acknowledged: this lane's server
        has answered nothing since, so only the journal can tell it. Else half the time the
        node another lane wrote last, else any node some lane added."""
        if self.rng.random() < self.config.follow_share:
            writing = [lane.writing for lane in self.lanes if lane is not self and lane.writing is not None]
            if writing:
                # Never a deadlock: that write is already sent, and waits on nobody.
                async with asyncio.timeout(self.config.call_timeout):
                    node_id = await asyncio.shield(self.rng.choice(writing))
                if node_id is not None:
                    return node_id
        others = [lane.last_written for lane in self.lanes if lane is not self and lane.last_written]
        if others and self.rng.random() < 0.5:
            return self.rng.choice(others)
        return self.rng.choice(self.driver.made_ids) if self.driver.made_ids else None

    def bounds(self, node_id: str, sent: int, answered: int) -> tuple[int | None, int]:
        """Which states of a node (indices into its history) a read sent at tick `sent` and
        answered by tick `answered` may show: from the last one acknowledged before it was
        sent (None: the add itself was not, so the node may be missing) to the last one sent
        before its answer (-1: none)."""
        history = self.driver.made[node_id].history
        low = None
        for k, version in enumerate(history):
            if version.acked is not None and version.acked < sent:
                low = k  # one lane writes a node, one write at a time: acknowledgements come in order
        high = max((k for k, version in enumerate(history) if version.sent < answered), default=-1)
        return low, high

    def window(self, node_id: str, sent: int, answered: int) -> tuple[list[_Version], bool]:
        """The states themselves, and whether the node may be missing."""
        low, high = self.bounds(node_id, sent, answered)
        return self.driver.made[node_id].history[(low or 0):high + 1], low is None

    def judge(self, node_id: str, sent: int, answered: int, seen: tuple | None, project: Any, what: str) -> None:
        """Hold what a read showed of a node (`seen`, None: not found) against its window.
        `project` maps a _Version to what this kind of read shows of it."""
        made = self.driver.made[node_id]
        low, high = self.bounds(node_id, sent, answered)
        states = made.history[(low or 0):high + 1]
        owner = self.owner(node_id)
        if owner is not self:
            self.report.checks += 1
            if low is not None and made.history[low].acked > self.previous_answer:
                self.report.fresh += 1
            if high > (low if low is not None else -1):
                self.report.racing += 1  # a write to it was in flight while the read was
        if seen is None:
            if low is not None:
                self.report.stale += 1
                self.report.problem(f"lane {self.index}: {what} {node_id} (lane {owner.index}'s) does not find it")
            return
        if any(project(v) == seen for v in states):
            return
        if low is not None and any(project(v) == seen for v in made.history[:low]):
            self.report.stale += 1
            self.report.problem(f"lane {self.index}: {what} {node_id} (lane {owner.index}'s) shows an older state "
                                f"{seen}, expected one of {[project(v) for v in states]}")
        else:
            self.wrong(f"{what} {node_id} (lane {owner.index}'s) shows {seen}, "
                       f"expected one of {[project(v) for v in states]}")

    async def read(self) -> None:
        name = _pick(self.rng, CONCURRENT_READS)
        target = await self.read_target() if name in ("soul_query", "soul_prime", "soul_discover") else None
        if target is None and name in ("soul_query", "soul_prime", "soul_discover"):
            name = "soul_hot"
        self.report.reads += 1
        self.report.by_kind[name] = self.report.by_kind.get(name, 0) + 1
        if name in ("soul_hot", "soul_related"):
            arguments = {"limit": 10} if name == "soul_hot" else {"query": self.rng.choice(self.driver.questions)}
            await self.call(name, **arguments)
            return
        word = self.driver.made[target].word if target else ""
        sent, self.previous_answer = self.tick(), self.last_answer
        if name == "soul_query":
            results = (await self.call("soul_query", query=word, limit=1))["results"]
            answered = self.tick()
            found = results[0] if results and results[0]["id"] == target else None
            if found is not None and found["content"] != self.driver.made[target].content:
                self.wrong(f"soul_query {target} shows content {found['content']!r}")
            self.judge(target, sent, answered,
                       None if found is None else (frozenset(found["parents"]), found["pinned"]),
                       lambda v: (v.parents, v.pinned), "soul_query")
        elif name == "soul_prime":
            focus = (await self.call("soul_prime", context=word, limit=1))["focus"]
            answered = self.tick()
            found = focus if focus and focus["id"] == target else None
            self.judge(target, sent, answered,
                       None if found is None else (frozenset(found["parents"]), found["pinned"], found["access_count"]),
                       lambda v: (v.parents, v.pinned, v.access), "soul_prime")
        elif name == "soul_discover":
            found = await self.call("soul_discover", node_id=target, depth=1, limit=100)
            self.judge_children(target, sent, self.tick(), [r["id"] for r in found["results"]])
        else:
            summary = await self.call("soul_summary")
            self.judge_summary(sent, self.tick(), (summary["nodes"], summary["edges"], summary["pinned"]))

    def judge_children(self, start: str, sent: int, answered: int, shown: list[str]) -> None:
        """soul_discover from `start` (depth 1): only its owner's writes give it children.
        Each must show once a write naming `start` as parent was acknowledged before the
        read was sent; none may show that no write sent before the answer named."""
        owner = self.owner(start)
        if owner is not self:
            self.report.checks += 1
        missing, unexplained = [], []
        for child_id in owner.made_ids:
            states, may_be_missing = self.window(child_id, sent, answered)
            if not states:  # its add was sent after the answer
                if child_id in shown:
                    unexplained.append(child_id)
                continue
            must = not may_be_missing and start in states[0].parents
            may = any(start in v.parents for v in states)
            if must and child_id not in shown and len(shown) < 100:
                missing.append(child_id)
            if child_id in shown and not may:
                unexplained.append(child_id)
        known = set(owner.made_ids)
        for child_id in shown:
            if child_id not in known and not (owner.adding and start in owner.adding[0] and owner.adding[1] < answered):
                unexplained.append(child_id)
        if missing:
            self.report.stale += 1
            self.report.problem(f"lane {self.index}: soul_discover {start} (lane {owner.index}'s) misses "
                                f"acknowledged children {missing}")
        if unexplained:
            self.wrong(f"soul_discover {start} (lane {owner.index}'s) shows children nobody linked: {unexplained}")

    def judge_summary(self, sent: int, answered: int, seen: tuple[int, int, int]) -> None:
        """soul_summary's counts: at least what was acknowledged before the read was sent,
        at most what had been sent before its answer (pins may also fall: each node counts
        its lowest and highest pin over its window)."""
        driver = self.driver
        low = [len(driver.prepared), driver.prepared_edges, driver.prepared_pins]
        high = list(low)
        for node_id in driver.made_ids:
            states, may_be_missing = self.window(node_id, sent, answered)
            if not states:
                continue
            low[0] += 0 if may_be_missing else 1
            high[0] += 1
            low[1] += 0 if may_be_missing else min(len(v.parents) for v in states)
            high[1] += max(len(v.parents) for v in states)
            low[2] += 0 if may_be_missing else min(v.pinned for v in states)
            high[2] += max(v.pinned for v in states)
        for lane in self.lanes:
            if lane.adding and lane.adding[1] < answered:
                high[0] += 1
                high[1] += len(lane.adding[0])
        self.report.checks += 1  # the counts cover the other lanes' writes too
        for name, value, least, most in zip(("nodes", "edges", "pinned"), seen, low, high):
            if value < least:
                self.report.stale += 1
                self.report.problem(f"lane {self.index}: soul_summary {name} {value}, acknowledged before: {least}")
            elif value > most:
                self.wrong(f"soul_summary {name} {value}, at most {most} written by then")


async def _concurrent(driver: Driver, clients: list[Client], config: ShareConfig, report: ShareReport) -> None:
    """`config.drivers` lanes at once, lane i on server i % servers, ops split between them."""
    lanes: list[Lane] = []
    ticks, flight = itertools.count(1), [0]
    for index in range(config.drivers):
        lanes.append(Lane(driver, index, clients[index % len(clients)], lanes, ticks, flight))
    share, extra = divmod(config.ops, config.drivers)
    deadline = time.monotonic() + config.seconds
    await asyncio.gather(*(lane.run(share + (index < extra), deadline) for index, lane in enumerate(lanes)))


async def _share(soul_file: Path, config: ShareConfig) -> ShareReport:
    report = ShareReport(servers=config.servers, concurrent=config.concurrent)
    driver = Driver(soul_file, config, report)
    report.nodes = len(driver.prepared)
    # Each wait below has its own timeout; this one bounds the whole run, shutdown included.
    whole = config.start_timeout + config.seconds + 2 * config.call_timeout + config.final_timeout + 60
    async with asyncio.timeout(whole), contextlib.AsyncExitStack() as stack:
        clients: list[Client] = []
        async with asyncio.timeout(config.start_timeout):
            for _ in range(config.servers):
                client = await stack.enter_async_context(Client(server_params(soul_file)))
                await driver.call(client, "soul_summary")  # a big file is read after start: wait for it here
                clients.append(client)
        started, cpu = time.monotonic(), _cpu_snapshot()
        deadline = started + config.seconds
        if config.concurrent:
            await _concurrent(driver, clients, config, report)
        for k in range(0 if config.concurrent else config.ops):
            if time.monotonic() > deadline:
                break
            here, there = clients[k % len(clients)], clients[(k + 1) % len(clients)]
            try:
                if driver.rng.random() < config.write_share:
                    await driver.write(here, there)
                else:
                    await driver.read(here)
            except ServerError as exc:
                report.errors += 1
                report.problem(str(exc))
            report.ops += 1
        report.seconds, cpu_after = time.monotonic() - started, _cpu_snapshot()
        report.driver_cpu, report.servers_cpu = cpu_after[0] - cpu[0], cpu_after[1] - cpu[1]
        report.others_cpu = max(0.0, cpu_after[2] - cpu[2] - report.driver_cpu - report.servers_cpu)
        async with asyncio.timeout(config.final_timeout):
            wrong: set[str] = set()
            for index, client in enumerate(clients):
                wrong |= await driver.verify_server(client, f"server {index + 1}")
    wrong |= driver.verify_file()
    report.lost += len(wrong)
    return report


def run_share(soul_file: Path, config: ShareConfig) -> ShareReport:
    """Run the workload against `config.servers` servers on an existing soul file."""
    try:
        return asyncio.run(_share(soul_file, config))
    except BaseExceptionGroup as group:
        # The SDK's task groups wrap a failure; show the failure itself.
        while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
            group = group.exceptions[0]
        raise group from None


def prepare_and_share(soul_file: Path, nodes: int, config: ShareConfig) -> ShareReport:
    """A fresh synthetic file of `nodes` nodes, then the workload on it."""
    prepare(soul_file, nodes, seed=config.seed)
    return run_share(soul_file, config)
