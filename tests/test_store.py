"""soul.json: atomic, private, never overwritten when unreadable, safe for two writers."""

import json
import os
import random
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from soulgraph.store import SCHEMA, SoulFile, SoulFileError, default_soul_file


def test_default_path_follows_hermes_home_and_never_openclaw(tmp_path):
    assert default_soul_file({"HERMES_HOME": str(tmp_path / "h")}) == tmp_path / "h" / "soul.json"
    assert default_soul_file({"HOME": str(tmp_path)}) == tmp_path / ".hermes" / "soul.json"
    assert "openclaw" not in str(default_soul_file({"HOME": "/home/x", "OPENCLAW_HOME": "/o"})).lower()


def test_created_on_first_write_with_mode_0600(tmp_path):
    soul = SoulFile(tmp_path / "home" / "soul.json")
    assert len(soul.graph()) == 0
    assert not soul.path.exists(), "reading must not create the file"
    with soul.change() as graph:
        graph.add("first memory")
    assert stat.S_IMODE(soul.path.stat().st_mode) == 0o600
    data = json.loads(soul.path.read_text())
    assert data["format"] == "soulgraph" and data["schema"] == SCHEMA
    assert [n["content"] for n in data["nodes"]] == ["first memory"]
    assert [p.name for p in soul.path.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_refused_change_leaves_file_alone(tmp_path):
    soul = SoulFile(tmp_path / "soul.json")
    with soul.change() as graph:
        graph.add("a")
    before = soul.path.read_bytes()
    with pytest.raises(Exception, match="unknown node"):
        with soul.change() as graph:
            graph.link("n1", "missing")
    assert soul.path.read_bytes() == before


@pytest.mark.parametrize(
    "content, problem",
    [
        (b"{not json", "not valid JSON"),
        (b'{"nodes": []}', "not a soul graph file"),
        (b"[1, 2]", "not a soul graph file"),
        (json.dumps({"format": "soulgraph", "schema": SCHEMA + 1, "nodes": []}).encode(), "newer than this soulgraph"),
        (json.dumps({"format": "soulgraph", "schema": 1, "nodes": [{"id": "a"}]}).encode(), "damaged soul graph"),
        (json.dumps({"format": "soulgraph", "schema": 1, "nodes": [
            {"id": "a", "content": "x", "parents": ["b"]}, {"id": "b", "content": "y", "parents": ["a"]}]}).encode(),
         "damaged soul graph"),
        (b"\xff\xfe\x00garbage", "not UTF-8"),
    ],
)
def test_unreadable_file_is_never_overwritten(tmp_path, content, problem):
    path = tmp_path / "soul.json"
    path.write_bytes(content)
    soul = SoulFile(path)
    with pytest.raises(SoulFileError) as err:
        with soul.change() as graph:
            graph.add("would overwrite")
    assert problem in str(err.value) and str(path) in str(err.value)
    assert path.read_bytes() == content


def test_directory_in_the_way_is_reported(tmp_path):
    (tmp_path / "soul.json").mkdir()
    with pytest.raises(SoulFileError, match="is a directory"):
        SoulFile(tmp_path / "soul.json").graph()


def test_reader_sees_another_processs_writes(tmp_path):
    path = tmp_path / "soul.json"
    reader, writer = SoulFile(path), SoulFile(path)
    assert len(reader.graph()) == 0
    with writer.change() as graph:
        graph.add("written elsewhere")
    assert [n.content for n in reader.graph().nodes.values()] == ["written elsewhere"]


WRITER = textwrap.dedent(
    """
    import sys
    import soulgraph.memory  # the write guard, as every writer installs it
    from soulgraph.store import SoulFile
    soul = SoulFile(sys.argv[1])
    tag = sys.argv[2]
    for i in range(int(sys.argv[3])):
        with soul.change() as graph:
            node = graph.add(f"{tag} memory {i}", [tag])
            if i:
                graph.link(graph.by_tag(tag)[1].id, node.id)
        print(i, flush=True)
    """
)


def test_two_processes_lose_none_of_each_others_writes(tmp_path):
    path = tmp_path / "soul.json"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    writers = [subprocess.Popen([sys.executable, str(script), str(path), tag, "60"], stdout=subprocess.PIPE)
               for tag in ("cli", "gateway")]
    for proc in writers:
        proc.communicate(timeout=120)
        assert proc.returncode == 0
    graph = SoulFile(path).graph()
    for tag in ("cli", "gateway"):
        contents = {n.content for n in graph.by_tag(tag)}
        assert contents == {f"{tag} memory {i}" for i in range(60)}
    assert sum(1 for _ in graph.edges()) == 2 * 59
    assert len({n.id for n in graph.nodes.values()}) == 120


def test_kill_minus_nine_never_leaves_a_broken_file(tmp_path):
    """Kill a writer at random moments; the file is always the old or a newer whole graph."""
    path = tmp_path / "soul.json"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    # Start from a graph big enough that a save takes a while to write.
    soul = SoulFile(path)
    with soul.change() as graph:
        for i in range(3000):
            graph.add(f"padding memory number {i} " + "x" * 200)
    rng = random.Random(7)
    last_count = len(SoulFile(path).graph())
    kills = 0
    for round_ in range(12):
        proc = subprocess.Popen([sys.executable, str(script), str(path), f"w{round_}", "1000"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        proc.stdout.readline()  # it is writing now
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += proc.returncode == -signal.SIGKILL
        graph = SoulFile(path).graph()  # raises if the file were broken
        assert len(graph) >= last_count
        last_count = len(graph)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert kills >= 10
    # A temp file left by a killed writer is cleaned up by the next save.
    with SoulFile(path).change() as graph:
        graph.add("after the storm")
    assert [p for p in Path(tmp_path).iterdir() if p.name.endswith(".tmp")] == []


def test_a_writer_that_waits_too_long_for_the_lock_is_told_which_process_holds_it(tmp_path):
    """The lock file names its holder, written in place at a fixed width (no truncation at each
    write); a process that cannot get the lock within lock_timeout says whose it is and writes
    nothing."""
    path = tmp_path / "soul.json"
    first = SoulFile(path)
    with first.change() as graph:
        graph.add("first memory", [])
    holder = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).resolve().parents[1] / "runtime")!r})
        from soulgraph.store import SoulFile
        soul = SoulFile({str(path)!r})
        with soul.change() as graph:
            graph.add("held", [])
            print("holding", flush=True)
            time.sleep(30)
    """)
    child = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "holding"
        waiting = SoulFile(path, lock_timeout=0.3)
        with pytest.raises(SoulFileError, match=f"pid {child.pid}\\)"):
            with waiting.change() as graph:
                graph.add("never written", [])
        assert (path.parent / "soul.json.lock").read_bytes() == b"%-15d\n" % child.pid
    finally:
        child.kill()
        child.wait(timeout=10)
    with first.change() as graph:  # the lock is free again: this process names itself
        graph.add("second memory", [])
    assert (path.parent / "soul.json.lock").read_bytes() == b"%-15d\n" % os.getpid()
    assert "never written" not in {n.content for n in SoulFile(path).graph().nodes.values()}
