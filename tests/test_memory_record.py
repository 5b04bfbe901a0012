"""The memory record (schema 3): typed, sourced fields on every node, checked wherever they
enter (the engine's add, a soul file's records, a journal's), kept through the store, and
old files migrated with a backup."""

import json

import pytest

from soulgraph.engine import record
from soulgraph.engine.graph import Node, SoulGraph, SoulGraphError
from soulgraph.engine.load import load_graph, parse_node_record
from soulgraph.store import SCHEMA, SoulFile, SoulFileError


def test_add_takes_the_memory_fields_and_checks_them():
    graph = SoulGraph(clock=lambda: 1000.0)
    node = graph.add("prefers short answers", kind="preference", source="tool:soul_add",
                     source_ref="session 7", writer="hermes", confidence=0.9, importance=0.8)
    assert (node.kind, node.source, node.confidence, node.status, node.privacy) == \
        ("preference", "tool:soul_add", 0.9, "active", "normal")
    assert node.seen_at == node.confirmed_at == 1000.0
    assert graph.add("who I am", pinned=True).kind == "axiom"
    assert graph.add("plain").kind == "note"
    for bad, message in [({"kind": "gossip"}, "kind 'gossip' is not one of note, axiom"),
                         ({"confidence": 1.5}, "confidence must be between 0 and 1"),
                         ({"importance": float("nan")}, "importance must be a finite number"),
                         ({"privacy": "public"}, "privacy 'public' is not one of"),
                         ({"valid_from": 10.0, "valid_to": 5.0}, "valid_to (5.0) is before valid_from")]:
        with pytest.raises(SoulGraphError, match=message.replace("(", r"\(").replace(")", r"\)")):
            graph.add("refused", **bad)
    assert len(graph) == 3


def test_only_fields_that_differ_from_their_defaults_are_written():
    assert Node("a", "x").to_dict().keys() == {"id", "content", "tags", "created_at", "last_accessed",
                                               "access_count", "pinned", "metadata"}
    node = Node("a", "x", kind="project", confidence=0.25, superseded_by="b", status="superseded")
    data = node.to_dict()
    assert {k: data[k] for k in ("kind", "confidence", "superseded_by", "status")} == \
        {"kind": "project", "confidence": 0.25, "superseded_by": "b", "status": "superseded"}
    assert Node.from_dict(data) == node


def _records(graph: SoulGraph) -> list[dict]:
    return [graph.record(node_id) for node_id in graph.nodes]


@pytest.mark.parametrize("field, value, message", [
    ("kind", "gossip", "kind 'gossip' is not one of"),
    ("kind", 3, "kind must be a string"),
    ("status", "deleted", "status 'deleted' is not one of active, superseded"),
    ("confidence", -0.1, "confidence must be between 0 and 1"),
    ("confidence", True, "confidence must be a finite number"),
    ("strength", -1, "strength must be 0 or more"),
    ("valid_to", "2026-03-01", "valid_to must be a finite number"),
    ("source", None, "source must be a string"),
])
def test_a_file_with_a_bad_memory_field_is_refused_naming_it(field, value, message):
    graph = SoulGraph()
    for i in range(5):
        graph.add(f"memory {i}", source="tool:soul_add")
    records = _records(graph)
    records[3][field] = value
    with pytest.raises(ValueError, match=message) as err:
        load_graph(records, next_id=6, exploration=None)
    assert "node 3" in str(err.value)
    with pytest.raises(ValueError, match=message):
        parse_node_record(records[3], "node 3")


def test_memory_fields_load_the_same_by_columns_and_record_by_record():
    graph = SoulGraph()
    kinds = record.KINDS
    for i in range(40):
        extra = {"kind": kinds[i % len(kinds)], "confidence": (i % 10) / 10} if i % 3 else {}
        graph.add(f"memory {i}", parents=[f"n{i}"] if i else [], source=f"seed:MEMORY.md:{i}" if i % 2 else "", **extra)
    records = _records(graph)
    records[5]["status"], records[5]["superseded_by"] = "superseded", "n7"
    records[6]["valid_from"] = 100  # an int is a number of seconds too
    by_columns = load_graph(records, next_id=41, exploration=None)
    one_by_one = [parse_node_record(r, "node")[0] for r in records]
    assert [by_columns.nodes[n.id] for n in one_by_one] == one_by_one
    assert by_columns.nodes["n6"].status == "superseded" and by_columns.nodes["n7"].valid_from == 100.0


def test_memory_fields_survive_the_journal_and_a_compaction(tmp_path):
    soul = SoulFile(tmp_path / "soul.json")
    with soul.change() as graph:
        graph.add("base")
    with soul.change() as graph:  # a journal record
        graph.add("commit to weekly demos", kind="goal_or_commitment", source="tool:soul_add",
                  source_ref="s1/m4", confidence=0.95, valid_from=1_700_000_000.0)
    fresh = SoulFile(soul.path).graph().nodes["n2"]
    assert (fresh.kind, fresh.source_ref, fresh.confidence, fresh.valid_from) == \
        ("goal_or_commitment", "s1/m4", 0.95, 1_700_000_000.0)
    soul.compact()
    assert json.loads(soul.path.read_text())["nodes"][1]["kind"] == "goal_or_commitment"
    assert SoulFile(soul.path).graph().nodes["n2"] == fresh


def test_a_schema_2_file_and_its_journal_are_migrated_with_backups(tmp_path):
    path = tmp_path / "soul.json"
    snapshot = {"format": "soulgraph", "schema": 2, "seq": 4, "next_id": 2, "saved_at": 1.0, "nodes": [
        {"id": "n1", "content": "from schema 2", "tags": [], "created_at": 1.0, "last_accessed": 1.0,
         "access_count": 0, "pinned": True, "metadata": {}, "parents": []}], "exploration": {"nodes": []}}
    path.write_text(json.dumps(snapshot))
    from soulgraph.store.journal import encode_line, header_line
    journal = header_line(4) + encode_line({"seq": 5, "nodes": [
        {"id": "n2", "content": "journaled in schema 2", "tags": [], "created_at": 2.0, "last_accessed": 2.0,
         "access_count": 0, "pinned": False, "metadata": {}, "parents": ["n1"]}], "next_id": 3})
    (tmp_path / "soul.json.journal").write_bytes(journal)
    soul = SoulFile(path)
    assert {n.content for n in soul.graph().nodes.values()} == {"from schema 2", "journaled in schema 2"}
    with soul.change() as graph:
        graph.add("written in schema 3", kind="semantic_fact")
    assert json.loads((tmp_path / "soul.json.bak-schema2").read_text()) == snapshot
    assert (tmp_path / "soul.json.journal.bak-schema2").read_bytes() == journal
    assert json.loads(path.read_text())["schema"] == SCHEMA == 4
    reread = SoulFile(path).graph()
    assert set(reread.parents["n2"]) == {"n1"} and reread.nodes["n3"].kind == "semantic_fact"


def test_a_journal_record_with_a_bad_memory_field_is_refused(tmp_path):
    soul = SoulFile(tmp_path / "soul.json")
    with soul.change() as graph:
        graph.add("base")
    from soulgraph.store.journal import encode_line
    with open(soul.journal_path, "ab") as handle:
        handle.write(encode_line({"seq": soul.seq + 1, "next_id": 3, "nodes": [
            {"id": "n2", "content": "x", "kind": "gossip"}]}))
    with pytest.raises(SoulFileError, match="kind 'gossip' is not one of"):
        SoulFile(soul.path).graph()


def test_strength_decays_by_half_lives_and_pins_never_decay():
    day = record.DAY
    assert record.effective_strength(4.0, 0.0, record.STRENGTH_HALF_LIFE) == pytest.approx(2.0)
    assert record.effective_strength(4.0, 0.0, 10 * day, pinned=True) == 4.0
    assert record.confirm(1.0, 0.0, 0.0) == 2.0
    assert record.weaken(2.0, 0.0, 0.0) == 1.0
