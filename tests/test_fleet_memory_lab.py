"""`fleet backup`, `fleet restore` and `fleet bootstrap --memory-from` against the real SSH lab.

Three hosts get the runtime (fleet-update at this repository's HEAD), two stay bare for the
moves. The tests run in order, like an operator's day: back up every host while a writer on each
keeps adding memories, prune with --keep, look with --check, restore one host from another's
backup, refuse bad input without changing anything, then move an agent to the fresh host.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from fleet.build import resolve_sha
from fleet.memory import soul_counts
from soulgraph.store.soulfile import SoulFile
from tests.fleet_helpers import clone_repo, reset_to_bare_hermes, run_fleet, run_update, snapshot

pytestmark = pytest.mark.lab
RESTART = 'echo restart >> "$HOME/gateway-restarts"'

# Adds a memory, then says how many it has added (one line per acknowledged write), until the
# stop file appears or 120 s pass.
WRITER = r"""
import sys, time, pathlib
import soulgraph.memory  # the write guard, as every writer installs it
from soulgraph.store.soulfile import SoulFile
soul, stop, name = SoulFile(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
count, deadline = 0, time.monotonic() + 120
while not stop.exists() and time.monotonic() < deadline:
    with soul.change() as graph:
        graph.add(f"{name} memory {count}: the writer keeps going while the fleet backs it up", ["writer"])
    count += 1
    print(count, flush=True)
"""


@pytest.fixture(scope="module")
def memory_lab(_ssh_lab_session, tmp_path_factory):
    lab = _ssh_lab_session
    reset_to_bare_hermes(lab)
    root = tmp_path_factory.mktemp("memory")
    names = [h.name for h in lab.hosts]
    inventory = lab.write_inventory(root / "inventory.yml", groups={"workers": names[:3], "spare": names[3:5]},
                                    common_vars={"gateway_restart_command": RESTART})
    repo = clone_repo(root / "repo")
    sha = resolve_sha("HEAD", repo)
    code, out = run_update("--yes", "-i", str(inventory), "workers", sha, repo=repo)
    assert code == 0, out
    yield lab, inventory, repo, sha, root
    lab.heal()


def soul_file(host) -> Path:
    return host.home / ".hermes" / "soul.json"


def release_python(host) -> str:
    return str(host.home / ".soulfleet" / "current" / "venv" / "bin" / "python")


def as_host(host, *argv, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", host.user, "--", *argv], capture_output=True, text=True,
                          timeout=120, check=True, **kw)


def add_memory(host, text: str) -> None:
    as_host(host, release_python(host), "-c",
            "import sys\nimport soulgraph.memory\nfrom soulgraph.store.soulfile import SoulFile\n"
            "with SoulFile(sys.argv[1]).change() as g:\n    g.add(sys.argv[2], ['test'])",
            str(soul_file(host)), text)


def contents(path: Path) -> set[str]:
    graph = SoulFile(path).graph()
    return {graph.nodes[n].content for n in graph.nodes}


def soul_files(host) -> dict[str, str]:
    folder = host.home / ".hermes"
    # Not the lock file: it names the last process that took the lock (a backup takes it too).
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.glob("soul*")
            if p.is_file() and not p.name.endswith(".lock")}


def folders(dest: Path, host) -> list[Path]:
    where = dest / host.name
    return sorted(p for p in where.iterdir() if p.is_dir()) if where.exists() else []


def test_backup_of_every_host_while_servers_write(memory_lab):
    lab, inventory, repo, sha, root = memory_lab
    hosts, dest = lab.hosts[:3], root / "backups"
    shared = Path(tempfile.mkdtemp(prefix="soulfleet-writers-"))
    os.chmod(shared, 0o755)  # the writers (the hosts' users) look for the stop file here
    stop = shared / "stop"
    writers = {h.name: subprocess.Popen(["runuser", "-u", h.user, "--", release_python(h), "-c", WRITER,
                                         str(soul_file(h)), str(stop), h.name],
                                        stdout=subprocess.PIPE, text=True) for h in hosts}
    acknowledged = {}
    try:
        for name, proc in writers.items():  # each writer under way: 20 writes acknowledged
            for _ in range(20):
                assert proc.stdout.readline().strip(), f"the writer on {name} stopped"
            acknowledged[name] = 20
        started = time.monotonic()
        code, out = run_fleet("backup", "--yes", "-i", str(inventory), "--dest", str(dest), "workers")
        seconds = time.monotonic() - started
        # Still writing after the backup: it never stopped them.
        for name, proc in writers.items():
            assert proc.stdout.readline().strip(), f"the writer on {name} stopped during the backup"
    finally:
        stop.touch()
        for proc in writers.values():
            proc.communicate(timeout=60)
    assert code == 0, out
    assert all(proc.returncode == 0 for proc in writers.values())
    assert "HOST" in out and out.count(": backed up ") == 3, out
    for h in hosts:
        (folder,) = folders(dest, h)
        backup, record = folder / "soul.json", json.loads((folder / "backup.json").read_text())
        assert stat.S_IMODE(backup.stat().st_mode) == 0o600
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and stat.S_IMODE(folder.parent.stat().st_mode) == 0o700
        counts = soul_counts(backup)
        assert counts["nodes"] == record["nodes"] and counts["edges"] == record["edges"], record
        assert record["sha256"] == hashlib.sha256(backup.read_bytes()).hexdigest()
        held = {c for c in contents(backup) if c.startswith(f"{h.name} memory ")}
        # Every write acknowledged before the backup began is in it.
        assert {f"{h.name} memory {i}: the writer keeps going while the fleet backs it up"
                for i in range(acknowledged[h.name])} <= held
        assert f"{h.name}: backed up {h.home}/.hermes/soul.json: {record['nodes']} memories" in out
        # The host's temporary copy is gone.
        assert list((h.home / ".soulfleet" / "backup-tmp").iterdir()) == []
    print(f"fleet backup of 3 hosts while each wrote: {seconds:.1f} s")


def test_keep_prunes_the_oldest_and_check_copies_nothing(memory_lab):
    lab, inventory, repo, sha, root = memory_lab
    host, dest = lab.hosts[0], root / "backups"
    first = folders(dest, host)
    # What a backup whose link dropped left on the host, and one a run in progress would hold.
    tmp = host.home / ".soulfleet" / "backup-tmp"
    as_host(host, "mkdir", "-p", str(tmp / "run.dropped"), str(tmp / "run.underway"))
    as_host(host, "touch", "-d", "2 hours ago", str(tmp / "run.dropped"))
    for _ in range(2):
        code, out = run_fleet("backup", "--yes", "-i", str(inventory), "--dest", str(dest), "--keep", "2", host.name)
        assert code == 0, out
    assert sorted(p.name for p in tmp.iterdir()) == ["run.underway"]  # the dropped run's folder is gone
    as_host(host, "rmdir", str(tmp / "run.underway"))
    kept = folders(dest, host)
    assert len(kept) == 2 and first[0] not in kept, kept
    assert f"removed 1 older: {first[0].name}" in out, out
    code, out = run_fleet("backup", "--check", "-i", str(inventory), "--dest", str(dest), "--keep", "2", host.name)
    assert code == 0, out
    assert f"{host.name}: would back up {host.home}/.hermes/soul.json (" in out
    assert f"would remove 1 older backup(s): {kept[0].name}" in out, out
    assert folders(dest, host) == kept  # nothing copied, nothing removed


def test_restore_onto_a_host_keeps_its_soul_and_restarts_the_gateway(memory_lab):
    lab, inventory, repo, sha, root = memory_lab
    source, target, dest = lab.hosts[0], lab.hosts[1], root / "backups"
    backup = folders(dest, source)[-1]
    add_memory(target, "written on the target after its backup")
    restarts = host_restarts(target)
    code, out = run_fleet("restore", target.name, "--from", str(backup), "--hermes", "--yes", "-i", str(inventory))
    assert code == 0, out
    assert contents(soul_file(target)) == contents(backup / "soul.json")
    kept = list((target.home / ".hermes").glob("soul-before-restore-*.json"))
    assert len(kept) == 1 and "written on the target after its backup" in contents(kept[0]), out
    assert f"the soul it replaced" in out and str(kept[0]) in out, out
    assert host_restarts(target) == restarts + 1, out
    assert (target.home / ".soulfleet" / "gateway-runtime").read_text() == sha + "\n"
    assert list((target.home / ".soulfleet" / "restore-tmp").iterdir()) == []
    # 'latest' is the newest backup of the host itself, under --dest.
    code, out = run_fleet("restore", source.name, "--from", "latest", "--check", "--dest", str(dest),
                          "-i", str(inventory))
    assert code == 0 and f"would restore {folders(dest, source)[-1] / 'soul.json'}" in out, out


def host_restarts(host) -> int:
    log = host.home / "gateway-restarts"
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_bad_input_is_refused_and_changes_nothing(memory_lab, tmp_path):
    lab, inventory, repo, sha, root = memory_lab
    target, spare = lab.hosts[2], lab.hosts[3]
    before = soul_files(target)
    code, out = run_fleet("restore", target.name, "--from", str(tmp_path / "no-such-backup"), "--yes", "-i", str(inventory))
    assert code == 1 and "no such backup" in out and "nothing was changed" in out, out
    code, out = run_fleet("restore", "no-such-host", "--from", str(root / "backups" / lab.hosts[0].name),
                          "--yes", "-i", str(inventory))
    assert code == 1 and "no host or group named 'no-such-host'" in out, out
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "soul.json").write_text('{"format": "soulgraph", "schema": 4, "seq": 3, "nodes": [')
    code, out = run_fleet("restore", target.name, "--from", str(damaged), "--yes", "-i", str(inventory))
    assert code == 1 and "is not a soul that loads" in out, out
    code, out = run_fleet("restore", "workers", "--from", str(damaged), "--yes", "-i", str(inventory))
    assert code == 1 and "restore one host at a time" in out, out
    assert soul_files(target) == before
    spare_before = snapshot(spare.home)
    code, out = run_fleet("bootstrap", "--yes", "--repo", str(repo), "--sha", sha, "-i", str(inventory),
                          "--memory-from", str(tmp_path / "no-such-backup"), spare.name)
    assert code == 1 and "not a host" in out and "nothing was done" in out, out
    assert snapshot(spare.home) == spare_before


def test_fleet_memories_shows_and_corrects_a_hosts_memories(memory_lab):
    lab, inventory, repo, sha, root = memory_lab
    host = lab.hosts[1]
    add_memory(host, "The backup window of the billing database is 02:00 UTC")
    code, out = run_fleet("memories", "-i", str(inventory), host.name, "search", "billing backup window", "--json")
    assert code == 0, out
    found = json.loads(out)
    assert found["soul_file"] == str(soul_file(host)) and found["results"], out
    node = found["results"][0]["id"]
    assert "02:00 UTC" in found["results"][0]["content"]
    code, out = run_fleet("memories", "-i", str(inventory), host.name, "edit", node, "--content",
                          "The backup window of the billing database is 03:30 UTC", "--reason", "moved")
    assert code == 0 and f"{node} is superseded by" in out, out
    assert "The backup window of the billing database is 03:30 UTC" in contents(soul_file(host))
    graph = SoulFile(soul_file(host)).graph()
    assert graph.nodes[node].status == "superseded" and graph.audit[-1]["writer"] == "operator:soulgraph.memories"
    new = graph.nodes[node].superseded_by

    # A hard forget asks first: with no terminal to ask on, it is refused and nothing changes.
    before = soul_files(host)
    code, out = run_fleet("memories", "-i", str(inventory), host.name, "forget", new, "--reason", "wrong", "--hard")
    assert code == 1 and "without --yes" in out and soul_files(host) == before, out
    code, out = run_fleet("memories", "-i", str(inventory), host.name, "forget", new, "--reason", "wrong", "--hard", "--yes")
    assert code == 0 and "is forgotten" in out, out
    assert not [p for p in (host.home / ".hermes").glob("soul*") if b"03:30 UTC" in p.read_bytes()]

    # Bad input: the host's refusal and exit code come back; fleet's own checks come first.
    code, out = run_fleet("memories", "-i", str(inventory), host.name, "show", "n99999")
    assert code == 1 and "unknown node id 'n99999'" in out, out
    code, out = run_fleet("memories", "-i", str(inventory), host.name, "list", "--soul-file", "/tmp/x")
    assert code == 1 and "not for fleet memories" in out, out
    code, out = run_fleet("memories", "-i", str(inventory), host.name, "edit", node)
    assert code == 1 and "no editor runs on the host" in out, out
    code, out = run_fleet("memories", "-i", str(inventory), "workers", "list")
    assert code == 1 and "one host at a time" in out, out
    code, out = run_fleet("memories", "-i", str(inventory), lab.hosts[3].name, "list")
    assert code == 1 and "no runtime deployed" in out, out


def test_move_an_agent_to_a_fresh_host(memory_lab):
    lab, inventory, repo, sha, root = memory_lab
    old, new, dest = lab.hosts[0], lab.hosts[3], root / "moves"
    add_memory(old, "learned on the old host just before the move")
    old_files = soul_files(old)
    code, out = run_fleet("bootstrap", "--yes", "--repo", str(repo), "--sha", sha, "-i", str(inventory),
                          "--dest", str(dest), "--memory-from", old.name, new.name)
    assert code == 0, out
    assert (new.home / ".soulfleet" / "current").readlink().name == sha
    moved = contents(soul_file(new))
    assert moved == contents(soul_file(old)) and "learned on the old host just before the move" in moved
    assert soul_files(old) == old_files  # the old host left as it was
    (backup,) = folders(dest, old)
    assert contents(backup / "soul.json") == moved
    assert f"{new.name}: restored {backup / 'soul.json'} onto {new.home}/.hermes/soul.json" in out, out


def test_a_fresh_host_gets_the_soul_of_a_backup_folder(memory_lab):
    lab, inventory, repo, sha, root = memory_lab
    new, backup = lab.hosts[4], folders(root / "backups", lab.hosts[2])[-1]
    code, out = run_fleet("bootstrap", "--yes", "--hermes", "--repo", str(repo), "--sha", sha, "-i", str(inventory),
                          "--memory-from", str(backup), new.name)
    assert code == 0, out
    assert contents(soul_file(new)) == contents(backup / "soul.json")
    assert f"the soul of {backup / 'soul.json'}" in out and host_restarts(new) >= 1, out
