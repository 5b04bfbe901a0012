"""The memory lifecycle (memory/lifecycle.py) and the `memory` toolset: every operation is
a journaled change with an audit entry, bad requests are refused with the file unchanged,
and forget leaves no byte of the content in any file the store wrote."""

import json
from pathlib import Path

import pytest

from soulgraph.engine.graph import CycleError, SoulGraph, SoulGraphError
from soulgraph.memory import lifecycle
from soulgraph.store import SoulFile
from tests.mcp_session import Session, with_server


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def graph_with(*contents: str) -> SoulGraph:
    graph = SoulGraph(clock=Clock())
    for content in contents:
        graph.add(content)
    return graph


def test_confirm_and_weaken_move_strength_and_are_audited():
    graph = graph_with("tests run with ./run-tests")
    lifecycle.confirm(graph, "n1", writer="t")
    assert graph.nodes["n1"].strength == 2.0
    graph.clock.now += 30 * 86400  # one half-life
    lifecycle.weaken(graph, "n1", writer="t", reason="flaky")
    assert graph.nodes["n1"].strength == pytest.approx(0.5)
    assert [e["action"] for e in lifecycle.history(graph, "n1")] == ["confirm", "weaken"]
    entry = lifecycle.history(graph, "n1")[1]
    assert entry["reason"] == "flaky" and entry["before"] != entry["after"] and len(entry["after"]) == 16


def test_supersede_keeps_history_ends_validity_and_refuses_cycles():
    graph = graph_with("deploys use rsync", "deploys use wheels", "wheel builds are cached")
    graph.link("n2", "n3")
    lifecycle.supersede(graph, "n1", "n2", writer="t")
    old = graph.nodes["n1"]
    assert (old.status, old.superseded_by, old.valid_to) == ("superseded", "n2", graph.clock.now)
    assert set(graph.parents["n2"]) == {"n1"}
    with pytest.raises(SoulGraphError, match="already superseded"):
        lifecycle.supersede(graph, "n1", "n3", writer="t")
    with pytest.raises(SoulGraphError, match="cannot supersede itself"):
        lifecycle.supersede(graph, "n2", "n2", writer="t")
    with pytest.raises(CycleError):  # n3 is built on n2, so the edge n3 -> n2 would close a cycle
        lifecycle.supersede(graph, "n3", "n2", writer="t")


def test_merge_keeps_both_sources_and_edges_and_refuses_a_child():
    graph = graph_with("root", "likes tea", "prefers tea", "tea notes")
    graph.link("n1", "n3")
    graph.link("n3", "n4")
    graph.tag("n3", "drinks")
    lifecycle.merge(graph, "n2", "n3", writer="t")
    assert "n3" not in graph.nodes
    assert set(graph.parents["n2"]) == {"n1"} and set(graph.children["n2"]) == {"n4"}
    assert "drinks" in graph.nodes["n2"].tags
    assert graph.nodes["n2"].metadata["merged_from"][0]["content"] == "prefers tea"
    with pytest.raises(SoulGraphError, match="built on one another"):
        lifecycle.merge(graph, "n2", "n4", writer="t")
    with pytest.raises(SoulGraphError, match="into itself"):
        lifecycle.merge(graph, "n2", "n2", writer="t")


def test_forget_needs_a_reason_and_force_for_a_pin():
    graph = graph_with("x")
    graph.add("I am the fleet's guardian", pinned=True)
    with pytest.raises(SoulGraphError, match="pinned axiom; forgetting it needs force"):
        lifecycle.forget(graph, "n2", "no longer true", writer="t")
    with pytest.raises(SoulGraphError, match="needs a reason"):
        lifecycle.forget(graph, "n1", "  ", writer="t")
    lifecycle.forget(graph, "n2", "persona changed", writer="t", force=True)
    assert "n2" not in graph.nodes
    (entry,) = lifecycle.history(graph, "n2")
    assert entry["action"] == "forget" and entry["reason"] == "persona changed" and entry["after"] is None
    assert "guardian" not in json.dumps(graph.audit)


def test_lifecycle_changes_roll_back_whole():
    graph = graph_with("a", "b")
    graph.begin()
    lifecycle.supersede(graph, "n1", "n2", writer="t")
    lifecycle.forget(graph, "n2", "oops", writer="t")
    graph.rollback()
    assert graph.nodes["n1"].status == "active" and "n2" in graph.nodes
    assert graph.audit == [] and set(graph.parents["n2"]) == set()


SECRETLESS_PRIVATE = "My sister's address is 12 Quay Street"


def bytes_under(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def test_forget_leaves_nothing_in_the_files(tmp_path):
    soul = SoulFile(tmp_path / "soul.json")
    with soul.change() as graph:
        graph.add("base")
    with soul.change() as graph:
        graph.add(SECRETLESS_PRIVATE)  # a journal record holding the content
    (tmp_path / "soul.json.bak-schema2").write_text(json.dumps({"nodes": [{"content": SECRETLESS_PRIVATE}]}))
    assert SECRETLESS_PRIVATE.encode() in bytes_under(tmp_path)
    with soul.change() as graph:
        lifecycle.forget(graph, "n2", "asked to forget", writer="t")
    assert SECRETLESS_PRIVATE.encode() not in bytes_under(tmp_path)
    assert not (tmp_path / "soul.json.bak-schema2").exists() and any("removed" in w for w in soul.warnings)
    fresh = SoulFile(soul.path).graph()
    assert "n2" not in fresh.nodes and lifecycle.history(fresh, "n2")[0]["reason"] == "asked to forget"


def test_the_memory_toolset_through_mcp(tmp_path):
    soul_file = tmp_path / "soul.json"

    async def scenario(s: Session):
        names = set(await s.tool_names())
        old = await s.call("soul_add", content="The team meets on Mondays", kind="routine")
        new = await s.call("soul_add", content="The team meets on Tuesdays", kind="routine")
        pinned = await s.call("soul_add", content="I guard the fleet", pinned=True)
        superseded = await s.call("soul_update", node_id=old["id"], action="supersede", by_id=new["id"],
                                  reason="moved in March")
        confirmed = await s.call("soul_update", node_id=new["id"], action="confirm")
        refusals = [
            await s.refused("soul_update", node_id=old["id"], action="supersede"),
            await s.refused("soul_update", node_id=new["id"], action="supersede", by_id=new["id"]),
            await s.refused("soul_update", node_id=new["id"], action="forget"),
            await s.refused("soul_forget", node_id=pinned["id"], reason="no"),
            await s.refused("soul_merge", keep_id=old["id"], merge_id=new["id"]),
        ]
        before = soul_file.read_bytes()
        history = await s.call("soul_history", node_id=old["id"])
        forgot = await s.call("soul_forget", node_id=pinned["id"], reason="persona changed", force=True)
        after_forget = await s.call("soul_history", node_id=pinned["id"])
        return names, superseded, confirmed, refusals, before, history, forgot, after_forget

    with_toolsets = ["--toolsets", "graph,memory"]
    names, superseded, confirmed, refusals, before, history, forgot, after_forget = with_server(
        soul_file, scenario, extra_args=with_toolsets)
    assert {"soul_update", "soul_merge", "soul_forget", "soul_history"} <= names and len(names) == 17
    assert superseded["status"] == "superseded" and superseded["superseded_by"] == "n2"
    assert confirmed["strength"] == 2.0
    for message, expected in zip(refusals, ["needs by_id", "cannot supersede itself", "action",
                                            "needs force=true", "built on one another"]):
        assert expected in message, message
    assert [e["action"] for e in history["entries"]] == ["supersede"]
    assert forgot == {"forgotten": "n3", "reason": "persona changed"}
    assert after_forget["entries"][0]["action"] == "forget"
    assert b"I guard the fleet" not in bytes_under(tmp_path)

    async def default_tools(s: Session):
        return await s.tool_names()

    assert len(with_server(soul_file, default_tools)) == 13


def test_default_recall_leaves_out_what_was_replaced_and_include_archived_finds_it(tmp_path):
    soul = SoulFile(tmp_path / "soul.json")
    with soul.change() as graph:
        root = graph.add("team rituals", ["team"])
        old = graph.add("standup is at nine", ["team"], parents=[root.id])
        new = graph.add("standup moved to ten", ["team"])
        lifecycle.supersede(graph, old.id, new.id, writer="t")
    for graph in (soul.graph(), SoulFile(soul.path).graph()):  # in memory, and as loaded
        assert [h.node.id for h in graph.query("standup", 5)] == [new.id]
        found = graph.query("standup", 5, include_archived=True)
        assert {(h.node.id, h.via) for h in found} == {(new.id, "match"), (old.id, "archived")}
        assert old.id not in [n.id for n in graph.hot(10)]
        assert old.id not in [n.id for n in graph.by_tag("team")]
        assert old.id in [n.id for n in graph.by_tag("team", include_archived=True)]
        assert old.id not in [h.node.id for h in graph.related("team rituals", 10)]
    with soul.change() as graph:  # and back into recall
        graph.update(old.id, status="active")
    assert old.id in [h.node.id for h in SoulFile(soul.path).graph().query("standup nine", 5)]


def test_superseded_memories_leave_soul_query_through_mcp(tmp_path):
    soul_file = tmp_path / "soul.json"

    async def scenario(s: Session):
        old = await s.call("soul_add", content="Deploys run on Fridays")
        new = await s.call("soul_add", content="Deploys run on Tuesdays now")
        await s.call("soul_update", node_id=old["id"], action="supersede", by_id=new["id"])
        default = await s.call("soul_query", query="deploys run")
        everything = await s.call("soul_query", query="deploys run", include_archived=True)
        return old["id"], new["id"], default, everything

    old_id, new_id, default, everything = with_server(soul_file, scenario, extra_args=["--toolsets", "graph,memory"])
    assert [r["id"] for r in default["results"]] == [new_id]
    assert {(r["id"], r["via"]) for r in everything["results"]} == {(new_id, "match"), (old_id, "archived")}


def test_filters_by_kind_creation_time_and_validity():
    from soulgraph.memory.filters import parse_time, where

    graph = SoulGraph(clock=Clock())
    day = 86400.0
    march = parse_time("2026-03-01", "t")
    old = graph.add("standup at nine", kind="routine", created_at=march - 30 * day)
    graph.add("meeting notes template", kind="note", created_at=march - 20 * day)
    graph.clock.now = march + 10 * day
    new = graph.add("standup at ten", kind="routine")
    lifecycle.supersede(graph, old.id, new.id, writer="t")
    ids = lambda **kw: [h.node.id for h in graph.query("standup", 10, where=where(**kw), include_archived=True)]  # noqa: E731
    assert ids(true_at=march) == [old.id]
    assert ids(true_at=march + 20 * day) == [new.id]
    assert set(ids(kinds=("routine",))) == {old.id, new.id}
    assert ids(created_before=march - 25 * day) == [old.id]
    assert [h.node.id for h in graph.query("meeting standup", 10, where=where(kinds=("note",)))] == ["n2"]
    with pytest.raises(ValueError, match="valid_at must be an ISO 8601 date"):
        parse_time("last tuesday", "valid_at")


def test_time_and_kind_filters_through_mcp(tmp_path):
    soul_file = tmp_path / "soul.json"

    async def scenario(s: Session):
        routine = await s.call("soul_add", content="Backups run nightly", kind="routine")
        await s.call("soul_add", content="Backups live on the NAS", kind="semantic_fact")
        by_kind = await s.call("soul_query", query="backups", kind="routine")
        future = await s.call("soul_query", query="backups", valid_at="2999-01-01")
        past = await s.call("soul_query", query="backups", created_before="2000-01-01")
        bad = await s.refused("soul_query", query="backups", valid_at="yesterday-ish")
        return routine["id"], by_kind, future, past, bad

    routine_id, by_kind, future, past, bad = with_server(soul_file, scenario)
    assert [r["id"] for r in by_kind["results"]] == [routine_id]
    assert len(future["results"]) == 2 and past["results"] == []
    assert "valid_at must be an ISO 8601 date" in bad
