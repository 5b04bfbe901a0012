"""The store's rarer paths, one regression test each (issue 26, items 1 to 6): each of these
lost or locked up a user's memory before. The model-based test (test_store_model.py) walks the
same paths at random; these pin them down by name."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from soulgraph.memory import lifecycle
from soulgraph.store import ForgetIncomplete, NotSynced, SoulFile, SoulFileError
from soulgraph.store import __main__ as store_cli
from soulgraph.store import soulfile as soulfile_module
from tests.faulty_io import FaultPlan, installed
from tests.mcp_session import with_server


def everything(folder: Path) -> bytes:
    return b"".join(path.read_bytes() for path in folder.iterdir() if path.is_file())


def check(path: Path) -> dict:
    return store_cli.check(path)


# ------------------------------------------------------------------ item 1
def test_a_hard_forget_after_a_compaction_leaves_a_file_that_loads(tmp_path):
    soul = SoulFile(tmp_path / "soul.json")
    with soul.change() as graph:
        parent = graph.add("the parent memory").id
        child = graph.add("built on the parent", parents=[parent]).id
    soul.compact()  # the child's line now sits in the snapshot, naming its parent
    with soul.change() as graph:
        lifecycle.forget(graph, parent, "asked to", writer="test")
    report = check(soul.path)
    assert report["ok"], report
    graph = SoulFile(soul.path).graph()
    assert parent not in graph and set(graph.parents[child]) == set()


def test_the_server_compacting_by_itself_then_a_hard_forget(tmp_path):
    """The issue's own steps, through the MCP server: the journal passes 1 MiB, the server
    compacts on its own, then the parent is forgotten."""
    soul_file = tmp_path / "soul.json"

    async def scenario(session):
        parent = (await session.call("soul_add", content="the parent memory"))["id"]
        await session.call("soul_add", content="built on the parent", parents=[parent])
        for i in range(130):
            await session.call("soul_add", content=f"note {i} " + "x" * 9_990)
        await session.call("soul_forget", node_id=parent, reason="asked to")

    with_server(soul_file, scenario, ["--toolsets", "graph,memory", "--no-embed"])
    report = check(soul_file)
    assert report["ok"], report
    assert report["nodes"] == 131


def test_forgetting_a_hypothesis_parent_leaves_a_file_that_loads(tmp_path):
    soul = SoulFile(tmp_path / "soul.json")
    with soul.change() as graph:
        parent = graph.add("a fact").id
        hypothesis = graph.explore("maybe because of the fact", parents=[parent]).id
    with soul.change() as graph:
        lifecycle.forget(graph, parent, "asked to", writer="test")
    assert check(soul.path)["ok"]
    assert SoulFile(soul.path).graph().branch_parents[hypothesis] == set()


# ------------------------------------------------------------------ item 2
def test_a_save_that_fails_on_a_full_disk_leaves_the_old_graph_and_a_file_that_loads(tmp_path, monkeypatch):
    soul = SoulFile(tmp_path / "soul.json")
    with soul.change() as graph:
        graph.add("kept")
    replacement = SoulFile(tmp_path / "other.json").graph()
    replacement.add("the replacement")

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patch:
        patch.setattr(soulfile_module, "write_atomically", disk_full)
        with pytest.raises(SoulFileError, match="No space left on device.*the graph was not replaced"):
            soul.save(replacement)
    assert [n.content for n in soul.loaded.nodes.values()] == ["kept"]
    with soul.change() as graph:
        graph.add("after the failed save")
    assert check(soul.path)["ok"]
    assert sorted(n.content for n in SoulFile(soul.path).graph().nodes.values()) == ["after the failed save", "kept"]


def test_save_writes_the_new_graph_not_the_old_lines_of_nodes_with_the_same_ids(tmp_path):
    soul = SoulFile(tmp_path / "soul.json")
    with soul.change() as graph:
        graph.add("old text")
    other = SoulFile(tmp_path / "other.json")
    with other.change() as graph:
        graph.add("new text")  # the same id, n1
    soul.save(SoulFile(other.path).graph())
    assert [n.content for n in SoulFile(soul.path).graph().nodes.values()] == ["new text"]


# ------------------------------------------------------------------ item 3
def _soul_with_a_secret(tmp_path: Path) -> tuple[SoulFile, str]:
    soul = SoulFile(tmp_path / "soul.json")
    with soul.change() as graph:
        graph.add("kept")
    with soul.change() as graph:  # appended: the text sits in the journal
        secret = graph.add("my locker code is 4-19-33").id
    assert b"4-19-33" in soul.journal_path.read_bytes()
    return soul, secret


def test_a_forget_whose_new_journal_cannot_be_started_leaves_the_text_in_no_file(tmp_path):
    soul, secret = _soul_with_a_secret(tmp_path)
    plan = FaultPlan()
    with installed(plan):
        journal_temp = _fail_nth(plan, "mkstemp", 2, errno.ENOSPC)  # soul.json's temp file, then the journal's
        with soul.change() as graph:
            lifecycle.forget(graph, secret, "asked to", writer="test")
    assert journal_temp.fired
    assert b"4-19-33" not in everything(tmp_path)
    assert check(soul.path)["ok"] and secret not in SoulFile(soul.path).graph()
    with soul.change() as graph:
        graph.add("the next change starts a journal again")
    assert check(soul.path)["ok"] and len(SoulFile(soul.path).graph()) == 2


def test_a_forget_that_cannot_remove_the_old_journal_fails_naming_it(tmp_path):
    soul, secret = _soul_with_a_secret(tmp_path)
    plan = FaultPlan()
    with installed(plan):
        _fail_nth(plan, "mkstemp", 2, errno.EIO, sticky=True)  # the journal's temp file, and all after
        with pytest.raises(ForgetIncomplete) as err:
            with soul.change() as graph:
                lifecycle.forget(graph, secret, "asked to", writer="test")
    assert err.value.path == soul.journal_path
    assert "still holds the forgotten text" in str(err.value) and "not complete" in str(err.value)
    # The change stands, in memory and in soul.json; only the named file still holds the text.
    assert secret not in soul.loaded and secret not in SoulFile(soul.path).graph()
    assert b"4-19-33" not in soul.path.read_bytes() and b"4-19-33" in soul.journal_path.read_bytes()


class _NthPoint:
    """Arms `plan` to fail the n-th call named `name` (counting from now)."""

    def __init__(self, plan: FaultPlan, name: str, n: int, code: int, sticky: bool):
        self.plan, self.name, self.left, self.code, self.sticky = plan, name, n, code, sticky
        self.fired = False
        self.original = plan.point
        plan.point = self.point

    def point(self, name: str):
        if self.plan.failing or self.fired:
            return self.original(name)
        if name == self.name:
            self.left -= 1
            if self.left == 0:
                self.fired = True
                self.plan.fail_at(0, self.code, sticky=self.sticky)
        return self.original(name)


def _fail_nth(plan: FaultPlan, name: str, n: int, code: int, sticky: bool = False) -> _NthPoint:
    plan.disarm()
    return _NthPoint(plan, name, n, code, sticky)


# ------------------------------------------------------------------ item 4
def test_a_complete_last_record_with_a_bad_checksum_is_damage_not_a_torn_tail(tmp_path):
    soul = SoulFile(tmp_path / "soul.json")
    with soul.change() as graph:
        graph.add("first")
    with soul.change() as graph:
        graph.add("acknowledged second")
    data = soul.journal_path.read_bytes()
    assert data.endswith(b"\n")
    damaged = data.replace(b"acknowledged second", b"acknowledged SECOND")
    soul.journal_path.write_bytes(damaged)
    report = check(soul.path)
    assert not report["ok"] and "damaged record" in report["problem"]
    with pytest.raises(SoulFileError, match="damaged record"):
        with SoulFile(soul.path).change() as graph:
            graph.add("must not be written")
    assert soul.journal_path.read_bytes() == damaged  # kept as it was, not cut


def test_an_unterminated_last_record_is_still_a_torn_tail(tmp_path):
    soul = SoulFile(tmp_path / "soul.json")
    with soul.change() as graph:
        graph.add("first")
    with open(soul.journal_path, "ab") as handle:
        handle.write(b'0badc0de {"seq": 2, "nodes": [')
    report = check(soul.path)
    assert report["ok"] and report["journal"]["torn_tail_bytes"] > 0


# ------------------------------------------------------------------ item 5
def test_a_compaction_that_fails_says_the_change_was_saved(tmp_path):
    soul = SoulFile(tmp_path / "soul.json", journal_min_bytes=1, journal_share=0)
    with soul.change() as graph:
        graph.add("first")
    plan = FaultPlan()
    with installed(plan):
        _fail_nth(plan, "mkstemp", 1, errno.ENOSPC)  # the compaction's snapshot, after the append
        with soul.change() as graph:
            graph.add("second")
    assert soul.warnings and "the change is saved in the journal" in soul.warnings[-1]
    assert "not made" not in soul.warnings[-1]
    assert sorted(n.content for n in SoulFile(soul.path).graph().nodes.values()) == ["first", "second"]


def test_a_snapshot_whose_folder_cannot_be_synced_is_kept_and_said_so(tmp_path):
    soul = SoulFile(tmp_path / "soul.json")
    plan = FaultPlan()
    with installed(plan):
        _fail_nth(plan, "fsync", 2, errno.EIO)  # the temp file's, then the folder's after the rename
        with pytest.raises(NotSynced, match="may not survive a power cut"):
            with soul.change() as graph:
                graph.add("in the file")  # a new file is written whole
    assert [n.content for n in soul.loaded.nodes.values()] == ["in the file"]
    assert [n.content for n in SoulFile(soul.path).graph().nodes.values()] == ["in the file"]


# ------------------------------------------------------------------ item 6
@pytest.fixture
def read_only_soul(tmp_path):
    """A soul on a real read-only file system: written, then seen through a read-only bind
    mount of its folder (EROFS for every write there, as on a read-only volume)."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("needs root to mount")
    written, seen = tmp_path / "rw", tmp_path / "ro"
    written.mkdir()
    seen.mkdir()
    soul = SoulFile(written / "soul.json")
    with soul.change() as graph:
        graph.add("written before the remount")
    with soul.change() as graph:
        graph.add("in the journal")
    if subprocess.run(["mount", "--bind", str(written), str(seen)]).returncode:
        pytest.skip("cannot bind-mount here")
    try:
        assert subprocess.run(["mount", "-o", "remount,bind,ro", str(seen)]).returncode == 0
        with pytest.raises(OSError) as refused:
            (seen / "probe").write_text("x")
        assert refused.value.errno == errno.EROFS
        yield seen / "soul.json"
    finally:
        subprocess.run(["umount", "-l", str(seen)])


def test_a_read_only_file_system_is_read_and_writes_fail_clearly(read_only_soul):
    report = check(read_only_soul)
    assert report["ok"] and report["nodes"] == 2, report
    soul = SoulFile(read_only_soul)
    assert len(soul.graph()) == 2
    with pytest.raises(SoulFileError, match="Read-only file system"):
        with soul.change() as graph:
            graph.add("refused")
    assert len(SoulFile(read_only_soul).graph()) == 2


def test_the_server_serves_a_soul_on_a_read_only_file_system(read_only_soul):
    async def scenario(session):
        summary = await session.call("soul_summary")
        found = await session.call("soul_query", query="journal")
        refused = await session.refused("soul_add", content="refused")
        return summary, found, refused

    summary, found, refused = with_server(read_only_soul, scenario, ["--no-embed"])
    assert summary["nodes"] == 2
    assert "in the journal" in json.dumps(found)
    assert "Read-only file system" in refused


# ------------------------------------------------------------------ files the old bugs wrote
def test_repair_mends_a_file_an_old_forget_broke_and_keeps_the_damaged_one(tmp_path):
    soul = SoulFile(tmp_path / "soul.json")
    with soul.change() as graph:
        parent = graph.add("the parent memory").id
        child = graph.add("built on the parent", parents=[parent]).id
        graph.explore("a hypothesis on the parent", parents=[parent])
    with soul.change() as graph:
        graph.add("after, in the journal")
    # What 04df4cc wrote after a hard forget of the parent: its node gone, the edges not.
    document = json.loads(soul.path.read_bytes())
    document["nodes"] = [record for record in document["nodes"] if record["id"] != parent]
    soul.path.write_text(json.dumps(document))
    assert not check(soul.path)["ok"]
    damaged = soul.path.read_bytes()
    done = subprocess.run([sys.executable, "-m", "soulgraph.store", "repair", str(soul.path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert {(e["node"], e["parent"]) for e in report["dropped"]} == {(child, parent), ("n3", parent)}
    assert Path(report["kept"]).read_bytes() == damaged
    assert check(soul.path)["ok"]
    graph = SoulFile(soul.path).graph()
    assert sorted(n.content for n in graph.nodes.values()) == ["after, in the journal", "built on the parent"]


def test_repair_refuses_other_damage_and_leaves_it(tmp_path):
    path = tmp_path / "soul.json"
    path.write_text('{"format": "soulgraph", "schema": 3, "nodes": "not a list"}')
    done = subprocess.run([sys.executable, "-m", "soulgraph.store", "repair", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "not a dangling edge" in done.stderr
    assert path.read_text() == '{"format": "soulgraph", "schema": 3, "nodes": "not a list"}'
    assert not list(tmp_path.glob("soul.json.damaged-*"))


def test_a_refused_journal_costs_no_file_descriptor_per_read(tmp_path):
    """A server answers every tool call on a damaged journal with the error: each must not
    leave a descriptor open (a long-lived server would run out)."""
    soul = SoulFile(tmp_path / "soul.json")
    with soul.change() as graph:
        graph.add("first")
    with soul.change() as graph:
        graph.add("second")
    soul.journal_path.write_bytes(soul.journal_path.read_bytes().replace(b"second", b"SECOND"))
    reader = SoulFile(soul.path)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(50):
        with pytest.raises(SoulFileError, match="damaged record"):
            reader.graph()
    assert len(os.listdir("/proc/self/fd")) <= before


# ------------------------------------------------------------------ a reader racing a compaction
def _compacted_between_the_reads(reader: SoulFile, writer: SoulFile, times: int, monkeypatch) -> None:
    """Make `reader`'s next `times` loads see `writer` compact after soul.json is read and before
    the journal is: the race a backup or a second server can meet."""
    real = SoulFile._open_journal
    left = [times]

    def open_journal_after_a_compaction(self):
        if self is reader and left[0]:
            left[0] -= 1
            with writer.change() as graph:
                graph.add(f"written while the reader read ({left[0]})")
            writer.compact()
        return real(self)

    monkeypatch.setattr(SoulFile, "_open_journal", open_journal_after_a_compaction)


def test_a_load_that_meets_a_compaction_reads_the_new_snapshot(tmp_path, monkeypatch):
    """soul.json read, then another process compacts (a new soul.json, then a journal that
    continues it), then the journal read: the load starts again from the new soul.json and
    holds every change, instead of calling soul.json older than its journal."""
    writer = SoulFile(tmp_path / "soul.json")
    with writer.change() as graph:
        graph.add("first memory")
    writer.compact()
    with writer.change() as graph:
        graph.add("only in the journal")
    reader = SoulFile(writer.path)
    _compacted_between_the_reads(reader, writer, 2, monkeypatch)
    contents = {node.content for node in reader.graph().nodes.values()}
    assert {"first memory", "only in the journal", "written while the reader read (1)",
            "written while the reader read (0)"} <= contents
    assert reader.seq == writer.seq


def test_a_load_that_meets_compactions_without_end_fails_with_a_clear_error(tmp_path, monkeypatch):
    writer = SoulFile(tmp_path / "soul.json")
    with writer.change() as graph:
        graph.add("first memory")
    reader = SoulFile(writer.path)
    _compacted_between_the_reads(reader, writer, soulfile_module.LOAD_ATTEMPTS, monkeypatch)
    with pytest.raises(SoulFileError, match=f"replaced by another process's compaction {soulfile_module.LOAD_ATTEMPTS} times"):
        reader.graph()
    assert reader.graph().nodes and reader.seq == writer.seq  # with no compaction in the way, it loads
