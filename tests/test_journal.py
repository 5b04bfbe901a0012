"""The journal under soul.json: constant-time durable writes, sharing without re-reading,
exact failure semantics, damaged and odd files refused without being touched."""

import errno
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from soulgraph.engine.graph import SoulGraph
from soulgraph.store import SCHEMA, SoulFile, SoulFileError, snapshot
from soulgraph.store import soulfile as soulfile_module
from soulgraph.store.journal import encode_line


def contents(graph: SoulGraph) -> set[str]:
    return {node.content for node in graph.nodes.values()}


def fresh(path: Path) -> SoulGraph:
    return SoulFile(path).graph()


def count_snapshot_reads(monkeypatch) -> list[int]:
    reads: list[int] = []
    real = snapshot.decode

    def counting(raw, *args, **kwargs):
        reads.append(len(raw))
        return real(raw, *args, **kwargs)

    monkeypatch.setattr(snapshot, "decode", counting)
    return reads


# ------------------------------------------------------------------ writing appends
def test_a_change_appends_one_record_and_leaves_soul_json_alone(tmp_path):
    soul = SoulFile(tmp_path / "soul.json")
    with soul.change() as graph:
        first = graph.add("first memory")  # a new file: written whole
    snapshot_bytes = soul.path.read_bytes()
    journal_before = soul.journal_path.read_bytes()
    with soul.change() as graph:
        graph.add("second memory", ["lesson"], parents=[first.id])
    assert soul.path.read_bytes() == snapshot_bytes
    added = soul.journal_path.read_bytes()[len(journal_before):]
    assert added.count(b"\n") == 1
    record = json.loads(added[9:])
    assert record["seq"] == 2 and [n["content"] for n in record["nodes"]] == ["second memory"]
    assert record["nodes"][0]["parents"] == [first.id]
    assert stat.S_IMODE(soul.journal_path.stat().st_mode) == 0o600
    assert contents(fresh(soul.path)) == {"first memory", "second memory"}


def test_compaction_folds_the_journal_into_a_complete_soul_json(tmp_path):
    soul = SoulFile(tmp_path / "soul.json", journal_share=0.0, journal_min_bytes=2_000)
    previous = None
    for i in range(40):
        with soul.change() as graph:
            previous = graph.add(f"memory {i}", parents=[previous] if previous else []).id
    assert soul.compactions >= 3
    # soul.json alone (ignoring the journal) is a whole, readable document at its seq.
    data = json.loads(soul.path.read_text())
    assert data["schema"] == SCHEMA and data["seq"] <= soul.seq
    journal_lines = soul.journal_path.read_bytes().splitlines()
    assert json.loads(journal_lines[0][9:])["base_seq"] == data["seq"]
    assert len(journal_lines) - 1 == soul.seq - data["seq"]
    assert len(fresh(soul.path)) == 40


# ------------------------------------------------------------------ sharing
def test_a_reader_catches_up_from_the_journal_without_rereading_soul_json(tmp_path, monkeypatch):
    path = tmp_path / "soul.json"
    writer = SoulFile(path, journal_share=0.0, journal_min_bytes=3_000)
    with writer.change() as graph:
        root = graph.add("root")
    reads = count_snapshot_reads(monkeypatch)
    reader = SoulFile(path)
    reader.graph()
    assert len(reads) == 1
    for i in range(60):
        with writer.change() as graph:
            node = graph.add(f"shared {i}", parents=[root.id])
        seen = reader.graph()  # a read issued after the acknowledgement
        assert node.id in seen.nodes and set(seen.parents[node.id]) == {root.id}
        with reader.change() as graph:
            graph.splay(node.id)
        assert writer.graph().nodes[node.id].access_count == 1
    assert writer.compactions + reader.compactions >= 2, "the test must cross compactions"
    assert len(reads) == 1, "compactions by the other process must not make a reader re-read soul.json"


def test_a_replaced_graph_is_read_again(tmp_path):
    path = tmp_path / "soul.json"
    reader = SoulFile(path)
    with SoulFile(path).change() as graph:
        graph.add("old")
    assert contents(reader.graph()) == {"old"}
    seeded = SoulGraph()
    seeded.add("seeded anew")
    SoulFile(path).save(seeded)
    assert contents(reader.graph()) == {"seeded anew"}


# ------------------------------------------------------------------ failures
def test_a_change_that_cannot_be_made_durable_is_not_kept_in_memory(tmp_path, monkeypatch):
    soul = SoulFile(tmp_path / "soul.json")
    with soul.change() as graph:
        base = graph.add("base")
    real = os.fdatasync

    def disk_full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(soulfile_module.os, "fdatasync", disk_full)
    with pytest.raises(SoulFileError, match="No space left on device.*the change was not made") as err:
        with soul.change() as graph:
            graph.add("REFUSED", parents=[base.id])
            graph.splay(base.id)
    assert str(soul.journal_path) in str(err.value)
    monkeypatch.setattr(soulfile_module.os, "fdatasync", real)
    graph = soul.graph()
    assert contents(graph) == {"base"} and graph.nodes[base.id].access_count == 0
    assert set(graph.children[base.id]) == set()
    with soul.change() as graph:
        graph.add("later")
    assert contents(fresh(soul.path)) == {"base", "later"}


def test_a_refused_compaction_write_is_not_kept_either(tmp_path, monkeypatch):
    soul = SoulFile(tmp_path / "soul.json")

    def no_write(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(soulfile_module, "write_atomically", no_write)
    with pytest.raises(SoulFileError, match="Read-only file system.*the change was not made"):
        with soul.change() as graph:
            graph.add("REFUSED")  # a new file is written whole
    assert len(soul.graph()) == 0 and soul.graph().next_id == 1
    assert not soul.path.exists()


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mount"), reason="needs root to mount a small tmpfs")
def test_a_full_disk_refuses_the_write_and_loses_nothing(tmp_path):
    """A real full file system: a tmpfs of 64 KiB, filled up."""
    folder = tmp_path / "small"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        soul = SoulFile(folder / "soul.json")
        with soul.change() as graph:
            base = graph.add("base")
        filler = folder / "filler"
        with open(filler, "wb", buffering=0) as handle, pytest.raises(OSError):
            while True:
                handle.write(b"x" * 4096)
        with pytest.raises(SoulFileError, match="No space left on device"):
            with soul.change() as graph:
                graph.add("REFUSED " + "y" * 8000, parents=[base.id])
        assert contents(soul.graph()) == {"base"}
        filler.unlink()
        with soul.change() as graph:
            graph.add("later")
        assert contents(fresh(soul.path)) == {"base", "later"}
    finally:
        subprocess.run(["umount", "-l", str(folder)])


def test_a_read_only_soul_json_is_not_written(tmp_path):
    soul = SoulFile(tmp_path / "soul.json")
    with soul.change() as graph:
        graph.add("kept")
    os.chmod(soul.path, 0o444)
    before = soul.path.read_bytes(), soul.journal_path.read_bytes()
    with pytest.raises(SoulFileError, match=r"soul\.json: is read-only \(mode 0444\); not written"):
        with soul.change() as graph:
            graph.add("REFUSED")
    assert (soul.path.read_bytes(), soul.journal_path.read_bytes()) == before
    assert stat.S_IMODE(soul.path.stat().st_mode) == 0o444
    assert contents(soul.graph()) == {"kept"}


def test_a_symlinked_soul_json_is_followed_and_stays_a_link(tmp_path):
    target = tmp_path / "store" / "real-soul.json"
    target.parent.mkdir()
    link = tmp_path / "home" / "soul.json"
    link.parent.mkdir()
    with SoulFile(target).change() as graph:
        graph.add("zero")
    link.symlink_to(target)
    soul = SoulFile(link, journal_share=0.0, journal_min_bytes=0)  # every write compacts
    for text in ("one", "two"):
        with soul.change() as graph:
            graph.add(text)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert contents(SoulFile(target).graph()) == {"zero", "one", "two"}
    assert (target.parent / "real-soul.json.journal").exists()


def test_a_dangling_symlink_is_an_error_not_an_empty_graph(tmp_path):
    link = tmp_path / "soul.json"
    link.symlink_to(tmp_path / "gone.json")
    with pytest.raises(SoulFileError, match="is a symlink to .*gone.json, which does not exist"):
        SoulFile(link).graph()
    with pytest.raises(SoulFileError, match="which does not exist"):
        with SoulFile(link).change() as graph:
            graph.add("x")
    assert link.is_symlink() and not (tmp_path / "gone.json").exists()


@pytest.mark.parametrize("document, problem", [
    ({"format": "soulgraph", "schema": 1, "nodes": [], "exploration": None}, None),
    ({"format": "soulgraph", "schema": True, "nodes": []}, "unreadable schema True"),
    ({"format": "soulgraph", "schema": 1, "nodes": [{"id": "a", "content": "x", "tags": "lesson"}]}, "tags"),
    ({"format": "soulgraph", "schema": 1, "nodes": {"a": 1}}, '"nodes" is dict'),
    ({"format": "soulgraph", "schema": 1, "nodes": [{"id": "a", "content": "x", "access_count": "7"}]}, "access_count"),
])
def test_damaged_documents_are_refused_in_one_line(tmp_path, document, problem):
    path = tmp_path / "soul.json"
    path.write_text(json.dumps(document))
    before = path.read_bytes()
    soul = SoulFile(path)
    if problem is None:  # `"exploration": null` is an empty branch, not a traceback
        assert len(soul.graph()) == 0
        return
    with pytest.raises(SoulFileError) as err:
        soul.graph()
    message = str(err.value)
    assert "\n" not in message and problem in message and str(path) in message and "left untouched" in message
    with pytest.raises(SoulFileError):
        with soul.change() as graph:
            graph.add("REFUSED")
    assert path.read_bytes() == before and not soul.journal_path.exists()


def test_deeply_nested_json_is_refused(tmp_path):
    path = tmp_path / "soul.json"
    path.write_text('{"format": "soulgraph", "schema": 1, "nodes": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(SoulFileError, match="nested too deeply"):
        SoulFile(path).graph()


# ------------------------------------------------------------------ the journal's own damage
def _written(tmp_path, n=3, **options) -> SoulFile:
    soul = SoulFile(tmp_path / "soul.json", **options)
    for i in range(n):
        with soul.change() as graph:
            graph.add(f"memory {i}")
    return soul


def test_a_torn_tail_is_ignored_counted_and_cut_off_by_the_next_writer(tmp_path):
    soul = _written(tmp_path)
    whole = encode_line({"seq": soul.seq + 1, "nodes": [{"id": "n99", "content": "never acknowledged"}], "next_id": 100})
    with open(soul.journal_path, "ab") as handle:
        handle.write(whole[: len(whole) // 2])  # a writer killed halfway through its append
    other = SoulFile(soul.path)
    assert contents(other.graph()) == {"memory 0", "memory 1", "memory 2"}
    assert other.torn_tail_bytes == len(whole) // 2
    with other.change() as graph:
        graph.add("after the tear")
    assert other.torn_tail_bytes == 0
    assert contents(fresh(soul.path)) == {"memory 0", "memory 1", "memory 2", "after the tear"}
    assert contents(soul.graph()) == contents(fresh(soul.path))


def test_a_damaged_record_before_sound_ones_refuses_the_journal(tmp_path):
    soul = _written(tmp_path, n=4)  # the first write makes soul.json, the next three are journal lines 1-3
    lines = soul.journal_path.read_bytes().splitlines(keepends=True)
    assert b"memory 1" in lines[1]
    lines[1] = lines[1].replace(b"memory 1", b"memory X")  # its checksum no longer matches
    soul.journal_path.write_bytes(b"".join(lines))
    before = soul.journal_path.read_bytes()
    with pytest.raises(SoulFileError, match=r"damaged record at byte .* \(a complete line whose checksum or JSON does not verify\)"):
        SoulFile(soul.path).graph()
    assert soul.journal_path.read_bytes() == before


def test_a_soul_json_older_than_its_journal_is_refused(tmp_path):
    soul = _written(tmp_path, journal_share=0.0, journal_min_bytes=0)
    old_snapshot = soul.path.read_bytes()
    with soul.change() as graph:
        graph.add("newer")  # compacts: the journal now continues a later snapshot
    soul.path.write_bytes(old_snapshot)  # someone restores an older soul.json
    with pytest.raises(SoulFileError, match="soul.json is older than its journal"):
        SoulFile(soul.path).graph()


def test_a_journal_without_its_soul_json_is_refused(tmp_path):
    soul = _written(tmp_path)
    soul.path.unlink()
    with pytest.raises(SoulFileError, match="is missing but its journal"):
        SoulFile(soul.path).graph()


def test_a_schema_1_file_is_migrated_on_first_write_with_a_backup(tmp_path):
    path = tmp_path / "soul.json"
    old = {"format": "soulgraph", "schema": 1, "next_id": 2, "nodes": [
        {"id": "n1", "content": "from an old runtime", "tags": [], "created_at": 1.0, "last_accessed": 1.0,
         "access_count": 0, "pinned": False, "metadata": {}, "parents": []}], "exploration": {"nodes": []}}
    path.write_text(json.dumps(old))
    soul = SoulFile(path)
    with soul.change() as graph:
        graph.add("new", parents=["n1"])
    assert json.loads((tmp_path / "soul.json.bak-schema1").read_text()) == old
    assert json.loads(path.read_text())["schema"] == SCHEMA
    assert contents(fresh(path)) == {"from an old runtime", "new"}


# ------------------------------------------------------------------ the operator's tools
def run_store(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "soulgraph.store", *args], capture_output=True, text=True, timeout=60)


def test_check_compact_export(tmp_path):
    soul = _written(tmp_path, n=5)
    torn = encode_line({"seq": 99, "nodes": [], "next_id": 1})[:10]
    with open(soul.journal_path, "ab") as handle:
        handle.write(torn)
    result = run_store("check", str(soul.path))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] and report["nodes"] == 5 and report["last_good_seq"] == 5
    assert report["journal"]["records"] == 4 and report["journal"]["torn_tail_bytes"] == 10

    exported = tmp_path / "export.json"
    assert run_store("export", str(soul.path), "--out", str(exported)).returncode == 0
    document = json.loads(exported.read_text())
    assert [n["content"] for n in document["nodes"]] == [f"memory {i}" for i in range(5)]

    result = run_store("compact", str(soul.path))
    assert result.returncode == 0, result.stderr
    report = json.loads(run_store("check", str(soul.path)).stdout)
    assert report["journal"]["records"] == 0 and report["snapshot_seq"] == 5 and report["nodes"] == 5
    assert json.loads(soul.path.read_text())["nodes"] == document["nodes"]

    soul.path.write_text("{broken")
    result = run_store("check", str(soul.path))
    assert result.returncode == 1 and "not valid JSON" in json.loads(result.stdout)["problem"]


def test_a_compaction_after_a_fresh_load_reuses_unchanged_lines_exactly(tmp_path):
    """The first compaction in a new process takes unchanged nodes' lines from the loaded
    snapshot instead of encoding them again; the result must be what encoding gives."""
    path = tmp_path / "soul.json"
    graph = SoulGraph()
    for i, node_id in enumerate(["n1", 'odd "id" \\ with ünïcode', "n3"]):
        graph.add(f"memory {i} ✓", ["t"], node_id=node_id)
    SoulFile(path).save(graph)
    soul = SoulFile(path)
    with soul.change() as changing:
        changing.splay("n3")
        changing.add("new one", parents=["n1"])
    soul.compact()
    document = json.loads(path.read_text())
    expected = [fresh(path).record(node_id) for node_id in fresh(path).nodes]
    assert document["nodes"] == expected
    assert document["nodes"][1]["id"] == 'odd "id" \\ with ünïcode'
    assert [n["access_count"] for n in document["nodes"] if n["id"] == "n3"] == [1]
