"""Backing up and restoring a live soul file (`python -m soulgraph.store backup|restore`), and
the operator's commands on a path where there is no soul file."""

from __future__ import annotations

import asyncio
import json
import os
import random
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp import Client

from soulgraph.store import SoulFile
from soulgraph.store import backup as backup_module
from soulgraph.store.backup import BackupError, backup, restore
from tests.mcp_session import Session, server_params


def run_store(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "soulgraph.store", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def contents(graph) -> set[str]:
    return {node.content for node in graph.nodes.values()}


def live_soul(folder: Path) -> SoulFile:
    """A soul whose last changes sit only in its journal: what a running server leaves."""
    soul = SoulFile(folder / "soul.json")
    with soul.change() as graph:
        plan = graph.add("Rollout plan: one wheel per sha", ["project:fleet"])
    with soul.change() as graph:
        graph.add("Switch the runtime with an atomic symlink rename", ["lesson"], parents=[plan.id])
    with soul.change() as graph:
        graph.pin(plan.id)
    with soul.change() as graph:
        graph.explore("Maybe the gateway restarts too often", ["hypothesis"], parents=[plan.id])
    with soul.change() as graph:
        graph.update(plan.id, importance=0.9)
    assert soul.journal_path.stat().st_size > 100, "the test needs changes that are in the journal only"
    return soul


def files(folder: Path) -> dict[str, bytes]:
    """What a folder holds (the lock file's content is only the last writer's pid)."""
    return {p.name: b"" if p.name.endswith(".lock") else p.read_bytes() for p in folder.iterdir()}


def image(graph) -> bytes:
    """Everything a graph holds, as a snapshot encodes it (for comparing two loads)."""
    from soulgraph.store import snapshot
    return snapshot.encode(graph, 0, 0.0, {})


# ------------------------------------------------------------------ no soul file at the path (issue 26, item 7)
def test_check_of_a_path_with_no_soul_file_fails(tmp_path):
    result = run_store("check", tmp_path / "typo.json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert report["problem"].startswith(f"no soul file at {tmp_path / 'typo.json'}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["compact"], ["export"], ["export", "--out", "OUT"], ["backup", "BACKUPS"]])
def test_commands_on_a_path_with_no_soul_file_refuse_and_create_nothing(tmp_path, command):
    missing = tmp_path / "home" / "typo.json"  # its folder is missing too: nothing may make it
    args = [str(tmp_path / "out.json") if part == "OUT" else str(tmp_path / "backups") if part == "BACKUPS" else part
            for part in command]
    result = run_store(args[0], missing, *args[1:])
    assert result.returncode == 1
    assert "no soul file at" in result.stderr and str(missing) in result.stderr
    assert result.stdout == ""
    assert list(tmp_path.iterdir()) == [], "no soul.json, journal, lock, folder or output may be created"


def test_compact_of_an_unreadable_soul_makes_no_lock_file(tmp_path):
    soul = live_soul(tmp_path)
    soul.path.unlink()  # a journal whose snapshot is gone: refused, and left as it is
    soul.lock_path.unlink()
    journal = soul.journal_path.read_bytes()
    result = run_store("compact", soul.path)
    assert result.returncode == 1 and "missing but its journal" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["soul.json.journal"]
    assert soul.journal_path.read_bytes() == journal


# ------------------------------------------------------------------ backup
def test_copying_soul_json_alone_loses_the_journal(tmp_path):
    """Why backup exists: a copy of soul.json from a live home misses what the journal holds."""
    soul = live_soul(tmp_path / "home")
    copy = tmp_path / "copy" / "soul.json"
    copy.parent.mkdir()
    copy.write_bytes(soul.path.read_bytes())
    copied = SoulFile(copy).graph()
    assert len(copied) < len(soul.graph()) or copied.pinned != soul.graph().pinned


def test_backup_folds_the_journal_in_and_check_reads_it(tmp_path):
    soul = live_soul(tmp_path / "home")
    result = run_store("backup", soul.path, f"{tmp_path / 'backups'}/")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    path = Path(report["path"])
    assert path.parent == tmp_path / "backups" and path.name.startswith("soul-") and path.suffix == ".json"
    assert report["ok"] and report["seq"] == soul.seq == 5 and report["nodes"] == 2 and report["hypotheses"] == 1
    assert report["bytes"] == path.stat().st_size
    assert 0 <= report["lock_seconds"] <= report["seconds"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name], "one file: no journal, lock or temp file"

    restored = SoulFile(path)
    assert image(restored.graph()) == image(SoulFile(soul.path).graph())
    assert restored.seq == 5 and restored.graph().pinned == {"n1"}

    checked = run_store("check", path)
    assert checked.returncode == 0, checked.stdout
    check = json.loads(checked.stdout)
    assert check["ok"] and check["nodes"] == 2 and check["pinned"] == 1 and check["hypotheses"] == 1
    assert check["snapshot_seq"] == check["last_good_seq"] == 5
    assert check["journal"]["exists"] is False
    assert not path.with_name(path.name + ".lock").exists(), "check and the verification only read"


def test_backup_to_a_file_refuses_to_overwrite_unless_forced(tmp_path):
    soul = live_soul(tmp_path / "home")
    dest = tmp_path / "memory.json"
    dest.write_text("an older backup")
    result = run_store("backup", soul.path, dest)
    assert result.returncode == 1 and "already exists; not overwritten" in result.stderr
    assert dest.read_text() == "an older backup"
    result = run_store("backup", soul.path, dest, "--force")
    assert result.returncode == 0, result.stderr
    assert len(SoulFile(dest).graph()) == 2


@pytest.mark.parametrize("name, problem", [("soul.json", "the soul file itself"), ("soul.json.journal", "its journal"),
                                           ("soul.json.lock", "its lock file")])
def test_backup_never_writes_over_the_soul_or_its_files(tmp_path, name, problem):
    soul = live_soul(tmp_path)
    before = files(tmp_path)
    with pytest.raises(BackupError, match=problem):
        backup(soul.path, tmp_path / name, force=True)
    assert files(tmp_path) == before


def test_backup_refuses_a_name_with_a_journal_beside_it(tmp_path):
    soul = live_soul(tmp_path / "home")
    (tmp_path / "old.json.journal").write_text("someone else's journal")
    with pytest.raises(BackupError, match="would be read as part of the backup"):
        backup(soul.path, tmp_path / "old.json")
    assert not (tmp_path / "old.json").exists()


def test_two_backups_into_one_folder_get_two_names(tmp_path):
    soul = live_soul(tmp_path / "home")
    first = backup(soul.path, f"{tmp_path / 'backups'}/")
    second = backup(soul.path, tmp_path / "backups")
    assert first["path"] != second["path"]
    assert len(list((tmp_path / "backups").iterdir())) == 2


def test_a_backup_that_does_not_verify_is_removed(tmp_path, monkeypatch):
    soul = live_soul(tmp_path / "home")
    real_write = backup_module.write_atomically

    def write_losing_the_last_memory(path, data, **kwargs):  # a copy that does not hold what was meant
        document = json.loads(data)
        document["nodes"] = document["nodes"][:-1]
        document["nodes"][0]["parents"] = []
        real_write(path, json.dumps(document).encode(), **kwargs)

    monkeypatch.setattr(backup_module, "write_atomically", write_losing_the_last_memory)
    dest = tmp_path / "backup.json"
    with pytest.raises(BackupError, match="did not verify"):
        backup(soul.path, dest)
    assert not dest.exists()


def test_backup_of_a_damaged_soul_is_refused(tmp_path):
    soul = live_soul(tmp_path / "home")
    soul.path.write_text("{not json")
    result = run_store("backup", soul.path, f"{tmp_path / 'backups'}/")
    assert result.returncode == 1 and "not valid JSON" in result.stderr and "no backup made" in result.stderr
    assert not (tmp_path / "backups").exists()


def test_backup_holds_the_lock_only_to_catch_up(tmp_path):
    """Writers wait for a backup about as long as for one read of the journal's tail: the
    whole read comes before the lock and the encoding after it."""
    soul = SoulFile(tmp_path / "soul.json")
    with soul.change() as graph:
        for i in range(5000):
            graph.add(f"memory {i}: " + "words that make a graph of some size " * 4, [f"tag{i % 50}"])
    for i in range(20):
        with soul.change() as graph:
            graph.add(f"late memory {i}")
    report = backup(soul.path, tmp_path / "backup.json")
    assert report["nodes"] == 5020 and report["seq"] == soul.seq
    assert report["lock_seconds"] < report["seconds"] / 5, report


def test_a_backup_waits_for_a_writer_and_then_holds_its_write(tmp_path):
    soul = live_soul(tmp_path / "home")
    writer = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "import soulgraph.memory\nfrom soulgraph.store import SoulFile\n"
        "soul = SoulFile(sys.argv[1])\n"
        "with soul.change() as graph:\n"
        "    print('locked', flush=True)\n"
        "    time.sleep(1.0)\n"
        "    graph.add('written while the backup waited')\n"
        "print('acknowledged', flush=True)\n"), str(soul.path)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "locked"
        report = backup(soul.path, tmp_path / "backup.json")
        assert writer.stdout.readline().strip() == "acknowledged"
    finally:
        writer.wait(timeout=30)
    assert report["lock_seconds"] < 0.5
    assert "written while the backup waited" in contents(SoulFile(tmp_path / "backup.json").graph())


# ------------------------------------------------------------------ restore
def test_restore_refuses_a_live_soul_without_force(tmp_path):
    soul = live_soul(tmp_path / "home")
    taken = backup(soul.path, tmp_path / "backup.json")
    with soul.change() as graph:
        graph.add("written after the backup")
    before = files(soul.path.parent)
    result = run_store("restore", taken["path"], soul.path)
    assert result.returncode == 1
    assert "holds 3 memories; not replaced" in result.stderr and "--force" in result.stderr
    assert files(soul.path.parent) == before, "nothing written, nothing kept"


def test_restore_keeps_the_soul_it_replaces_and_a_running_server_sees_the_backup(tmp_path):
    soul = live_soul(tmp_path / "home")
    taken = backup(soul.path, tmp_path / "backup.json")
    with soul.change() as graph:
        graph.add("written after the backup")
    with soul.change() as graph:
        graph.pin("n2")  # a different state of a node the backup holds too
    server = SoulFile(soul.path)  # another process, serving the file throughout
    replaced = image(server.graph())
    assert "written after the backup" in contents(server.graph())

    result = run_store("restore", taken["path"], soul.path, "--force")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] and report["nodes"] == 2 and report["backup_seq"] == 5
    assert report["seq"] > 7, "numbered above everything the old files held, so servers read it anew"

    kept = Path(report["kept"]["path"])
    assert kept.parent == soul.path.parent and kept.name.startswith("soul-before-restore-")
    assert report["kept"]["seq"] == 7 and report["kept"]["nodes"] == 3
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert image(SoulFile(kept).graph()) == replaced, "the kept copy holds the replaced soul, its journal included"

    backed_up = image(SoulFile(taken["path"]).graph())
    assert image(server.graph()) == backed_up, "a server that served the old file sees the restored graph"
    assert server.graph().pinned == {"n1"}
    assert image(SoulFile(soul.path).graph()) == backed_up
    with server.change() as graph:  # and writes on top of it
        graph.add("after the restore")
    assert contents(SoulFile(soul.path).graph()) == contents(SoulFile(taken["path"]).graph()) | {"after the restore"}
    assert json.loads(run_store("check", soul.path).stdout)["ok"]


def test_restore_into_a_new_home(tmp_path):
    soul = live_soul(tmp_path / "old")
    taken = backup(soul.path, tmp_path / "backup.json")
    report = restore(taken["path"], tmp_path / "new" / "soul.json")
    assert report["kept"] is None and report["nodes"] == 2
    assert image(SoulFile(tmp_path / "new" / "soul.json").graph()) == image(SoulFile(taken["path"]).graph())


def test_restore_of_a_damaged_backup_leaves_the_soul_alone(tmp_path):
    soul = live_soul(tmp_path / "home")
    damaged = tmp_path / "backup.json"
    damaged.write_text('{"format": "soulgraph", "schema": 3, "nodes": [{"id": "n1"}]}')
    before = files(soul.path.parent)
    result = run_store("restore", damaged, soul.path, "--force")
    assert result.returncode == 1 and "damaged soul graph" in result.stderr and "not touched" in result.stderr
    assert files(soul.path.parent) == before
    result = run_store("restore", tmp_path / "missing.json", soul.path, "--force")
    assert result.returncode == 1 and "no backup at" in result.stderr


def test_restore_will_not_replace_a_soul_it_cannot_keep(tmp_path):
    soul = live_soul(tmp_path / "home")
    taken = backup(soul.path, tmp_path / "backup.json")
    soul.path.write_text("{not json")
    with pytest.raises(BackupError, match="cannot be kept before it is replaced"):
        restore(taken["path"], soul.path, force=True)
    assert soul.path.read_text() == "{not json"


# ------------------------------------------------------------------ the proof: a backup while two servers write
WORDS = ("journal", "snapshot", "gateway", "rollout", "wheel", "symlink", "fleet", "memory", "recall", "lesson",
         "axiom", "splay", "compaction", "checksum", "restore", "backup", "server", "agent", "prompt", "skill")


def test_a_backup_taken_while_two_servers_write_holds_every_acknowledged_write(tmp_path):
    """Two real MCP servers on one soul.json, each written to as fast as it answers, with notes
    of ~9 kB so the journal passes its 1 MiB and the servers compact during the run. Three
    backups are taken by the CLI meanwhile; each must load, pass check, and hold every write
    acknowledged before it was started. Then one is restored under the running servers."""
    soul_file = tmp_path / "home" / "soul.json"
    seed = SoulFile(soul_file)
    with seed.change() as graph:
        graph.add("seed memory")
    rng = random.Random(26)
    params = server_params(soul_file, extra_args=["--no-embed"])
    call_timeout = 60.0

    def note(word: str) -> str:
        return word + " " + " ".join(rng.choice(WORDS) for _ in range(900))[:8800]

    async def scenario():
        acked: list[str] = []
        stop = asyncio.Event()
        async with Client(params) as first, Client(params) as second:
            sessions = [Session(first), Session(second)]

            async def write(session: Session, name: str) -> None:
                number = 0
                while not stop.is_set():
                    number += 1
                    word = f"{name}{number:05d}"
                    await asyncio.wait_for(session.call("soul_add", content=note(word), tags=["proof"]), call_timeout)
                    acked.append(word)

            writers = [asyncio.create_task(write(session, name)) for session, name in zip(sessions, ("alpha", "bravo"))]
            taken = []
            try:
                deadline = time.monotonic() + 300
                for target in (60, 150, 260):
                    while len(acked) < target:
                        assert time.monotonic() < deadline, f"only {len(acked)} writes acknowledged"
                        assert not any(task.done() for task in writers), [t.exception() for t in writers if t.done()]
                        await asyncio.sleep(0.01)
                    before = set(acked)  # every write acknowledged before the backup began
                    process = await asyncio.create_subprocess_exec(
                        sys.executable, "-m", "soulgraph.store", "backup", str(soul_file), str(tmp_path / "backups") + "/",
                        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
                    try:
                        out, err = await asyncio.wait_for(process.communicate(), 120)
                    except TimeoutError:
                        process.kill()
                        raise
                    assert process.returncode == 0, err.decode()
                    taken.append((before, json.loads(out), len(acked)))
            finally:
                stop.set()
                await asyncio.wait_for(asyncio.gather(*writers), call_timeout)

            compacted = json.loads((await asyncio.to_thread(run_store, "check", soul_file)).stdout)
            # Restore the first backup under the running servers: both answer from it next.
            result = await asyncio.to_thread(run_store, "restore", taken[0][1]["path"], soul_file, "--force")
            assert result.returncode == 0, result.stderr
            restored = json.loads(result.stdout)
            summaries = [await asyncio.wait_for(s.call("soul_summary"), call_timeout) for s in sessions]
            return acked, taken, restored, summaries, compacted

    acked, taken, restored, summaries, compacted = asyncio.run(scenario())
    print(f"\n{len(acked)} writes acknowledged; backups at {[len(before) for before, _, _ in taken]} with "
          f"{[count - len(before) for before, _, count in taken]} acknowledged while each ran; lock held "
          f"{[report['lock_seconds'] for _, report, _ in taken]} s of {[report['seconds'] for _, report, _ in taken]} s; "
          f"soul.json compacted at change {compacted['snapshot_seq']}")

    during = [count - len(before) for before, _, count in taken]
    assert any(during), f"the servers went on writing while a backup ran (writes acknowledged meanwhile: {during})"
    for before, report, _ in taken:
        path = Path(report["path"])
        held = {node.content.split(" ", 1)[0] for node in SoulFile(path).graph().nodes.values()}
        missing = before - held
        assert not missing, f"{path.name} lost {len(missing)} acknowledged writes, e.g. {sorted(missing)[:5]}"
        assert report["nodes"] == len(held) >= len(before) + 1
        check = run_store("check", path)
        assert check.returncode == 0 and json.loads(check.stdout)["ok"], check.stdout
    assert len({report["path"] for _, report, _ in taken}) == 3

    final = json.loads(run_store("check", restored["kept"]["path"]).stdout)
    assert final["ok"] and final["nodes"] == len(acked) + 1, "the soul that restore replaced is kept whole"
    assert restored["kept"]["seq"] > taken[-1][1]["seq"]
    checks = json.loads(run_store("check", soul_file).stdout)
    assert checks["ok"] and checks["nodes"] == taken[0][1]["nodes"]
    assert [summary["nodes"] for summary in summaries] == [taken[0][1]["nodes"]] * 2
    # ~9 kB a note: the journal passed 1 MiB, so the servers compacted while the backups ran.
    assert compacted["ok"] and compacted["snapshot_seq"] > 100, compacted


def test_backup_report_names_what_it_wrote(tmp_path):
    soul = live_soul(tmp_path / "home")
    report = backup(soul.path, tmp_path / "b.json")
    assert set(report) == {"soul_file", "path", "seq", "nodes", "hypotheses", "bytes", "lock_seconds", "seconds", "ok"}
    assert report["soul_file"] == str(soul.path) and report["path"] == str(tmp_path / "b.json")
    assert os.path.getsize(report["path"]) == report["bytes"]
