"""The fleet-wide run lock (fleet/run_lock.py), between real processes, and the message a run
gets without an inventory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleet import run_lock

REPO = Path(__file__).parents[1]

# Takes the run lock of argv[1] as a run would, says so, and holds it until stdin closes.
HOLDER = r"""
import sys
from fleet import run_lock
lock = run_lock.take(sys.argv[1], "fleet-update --yes -i inv all abc123")
print("held", flush=True)
sys.stdin.read()
lock.release()
"""


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  hosts:\n    h1:\n      address: 127.0.0.1\n      port: 1\n")  # nothing listens
    return inventory


def hold(inventory: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(inventory)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=REPO, env=dict(os.environ))
    assert proc.stdout.readline().strip() == "held"
    return proc


def let_go(proc: subprocess.Popen) -> None:
    proc.stdin.close()
    proc.wait(timeout=30)


def test_a_second_run_is_refused_naming_the_holder_until_the_first_is_done(state):
    first = hold(state)
    try:
        with pytest.raises(run_lock.RunLocked) as refused:
            run_lock.take(state, "fleet backup")
        message = str(refused.value)
        assert f"pid {first.pid}" in message and "'fleet-update --yes -i inv all abc123'" in message, message
        assert str(state.resolve()) in message and "--wait" in message
        # Another inventory is another lock.
        other = state.with_name("other.yml")
        run_lock.take(other, "fleet backup").release()
    finally:
        let_go(first)
    with run_lock.take(state, "fleet backup") as lock:  # free once the holder is done
        assert json.loads(lock.path.read_text())["pid"] == os.getpid()


def test_the_same_inventory_named_two_ways_is_one_lock(state, monkeypatch):
    monkeypatch.chdir(state.parent)
    assert run_lock.lock_path("inventory.yml") == run_lock.lock_path(state) != run_lock.lock_path(None)


def test_wait_takes_the_lock_once_the_holder_lets_go(state):
    first = hold(state)
    started = time.monotonic()
    subprocess.Popen(["sh", "-c", f"sleep 1; kill {first.pid}"])  # the holder dies: the kernel frees the lock
    lock = run_lock.take(state, "fleet backup", wait=20)
    waited = time.monotonic() - started
    lock.release()
    first.wait(timeout=30)
    assert 0.8 < waited < 10, waited


def test_wait_gives_up_after_its_seconds(state):
    first = hold(state)
    try:
        started = time.monotonic()
        with pytest.raises(run_lock.RunLocked, match="after waiting 0.5 s"):
            run_lock.take(state, "fleet backup", wait=0.5)
        assert 0.4 < time.monotonic() - started < 5
    finally:
        let_go(first)


def cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from fleet.cli import fleet; fleet()", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(REPO), **(env or {})))


@pytest.mark.parametrize("command", [["update", "--yes"], ["backup", "--yes"], ["bootstrap", "--yes"],
                                     ["restore", "--yes", "--from", "x"]])
def test_commands_exit_75_while_another_run_holds_the_inventory(state, command, tmp_path):
    first = hold(state)
    try:
        args = [*command, "-i", str(state), "h1"]
        if command[0] == "restore":  # a real backup, so it gets as far as the lock
            backup = tmp_path / "b" / "soul.json"
            backup.parent.mkdir()
            from soulgraph.store.soulfile import SoulFile
            with SoulFile(backup).change() as graph:
                graph.add("one memory")
            args[args.index("x")] = str(backup)
        done = cli(*args, cwd=tmp_path, env={"XDG_STATE_HOME": os.environ["XDG_STATE_HOME"]})
    finally:
        let_go(first)
    assert done.returncode == 75, done.stdout + done.stderr
    assert "another fleet run holds the run lock" in done.stderr and f"pid {first.pid}" in done.stderr


def test_check_runs_take_no_lock(state, tmp_path):
    first = hold(state)
    try:
        done = cli("backup", "--check", "-i", str(state), "h1", cwd=tmp_path,
                   env={"XDG_STATE_HOME": os.environ["XDG_STATE_HOME"]})
    finally:
        let_go(first)
    assert "another fleet run" not in done.stderr  # it went on to the host, unreachable here
    assert done.returncode == 4 and "h1: UNREACHABLE" in done.stdout, done.stdout + done.stderr


def test_a_fresh_clone_without_an_inventory_is_told_where_to_start(tmp_path):
    done = subprocess.run([sys.executable, "-c", "from fleet.cli import fleet_update; fleet_update()",
                           "--hermes", "--yes", "all", "HEAD"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 1, done.stdout + done.stderr
    message = done.stderr
    assert "no inventory" in message and "inventory.example" in message and "-i PATH" in message, message
    assert "'local'" in message, message


def test_the_lock_file_says_which_command_holds_it(state, monkeypatch):
    from click.testing import CliRunner

    from fleet.cli import fleet

    seen = {}
    take = run_lock.take

    def recording_take(inventory, command, wait=0.0):
        lock = take(inventory, command, wait)
        seen.update(json.loads(lock.path.read_text()), inventory=inventory)
        return lock

    monkeypatch.setattr(run_lock, "take", recording_take)
    result = CliRunner().invoke(fleet, ["backup", "--yes", "-i", str(state), "h1"])
    assert result.exit_code == 4, result.output  # h1 is unreachable; the lock was taken first
    assert seen["command"] == "fleet backup h1" and seen["pid"] == os.getpid() and seen["inventory"] == str(state)
    assert set(seen) >= {"user", "host", "started"}
    run_lock.take(state, "the next run").release()  # let go when the run ended
