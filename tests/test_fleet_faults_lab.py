"""fleet-update when a host stops answering mid-task (issue 14, item 1), on the SSH lab.

The drop is real: the host's sshd, its established session processes and every process of its
user get SIGSTOP (tests/lab.py `freeze`), so the TCP connection stays open and nothing answers
on it, as when a link goes down. The run must report that host unreachable within the bound
docs/fleet.md states while the others finish, and a second Ctrl-C must exit at once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fleet.build import resolve_sha
from fleet.roles import Play
from fleet.connections.ssh import PROBE_TIMEOUT, SILENCE_PROBE
from tests.fleet_helpers import clone_repo, commit_file, reset_to_bare_hermes, run_update
from tests.test_fleet_lab import recap_rows

pytestmark = pytest.mark.lab
RESTART = 'echo restart >> "$HOME/gateway-restarts"'
BOUND = SILENCE_PROBE + PROBE_TIMEOUT + 1  # the documented bound on a silent host


@pytest.fixture(scope="module")
def faults_lab(_ssh_lab_session, tmp_path_factory):
    lab = _ssh_lab_session
    reset_to_bare_hermes(lab)
    root = tmp_path_factory.mktemp("faults")
    inventory = lab.write_inventory(root / "inventory.yml", common_vars={"gateway_restart_command": RESTART})
    repo = clone_repo(root / "repo")
    targets = ",".join(h.name for h in lab.hosts[:3])
    code, out = run_update("--yes", "-i", str(inventory), targets, resolve_sha("HEAD", repo), repo=repo)
    assert code == 0, out
    yield lab, inventory, repo, targets
    lab.heal()


def freeze_when(lab, host, path: Path, timeout: float = 120) -> dict:
    """Freeze `host` as soon as `path` appears on it (its task is then under way)."""
    happened: dict = {}

    def watch():
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not path.exists():
            time.sleep(0.05)
        lab.freeze(host)
        happened["at"] = time.monotonic()

    threading.Thread(target=watch, daemon=True).start()
    return happened


def test_a_host_that_stops_answering_mid_task_is_unreachable_within_the_bound(faults_lab):
    lab, inventory, repo, targets = faults_lab
    sha = commit_file(repo, "runtime/soulgraph/_fault_marker.py", "MARK = 1\n", "a new sha")
    victim = lab.hosts[1]
    happened = freeze_when(lab, victim, victim.home / ".soulfleet" / "releases" / sha / "wheels")
    try:
        code, out = run_update("--yes", "-i", str(inventory), targets, sha, repo=repo)
        ended = time.monotonic()
    finally:
        lab.thaw(victim)
    assert "at" in happened, "the host never began its venv task"
    assert code == 4, out
    assert ended - happened["at"] <= BOUND + 15, (ended - happened["at"], out)  # + the others' last tasks
    assert f"{victim.name}: UNREACHABLE" in out and "stopped answering" in out, out
    for h in lab.hosts[:3]:
        if h is not victim:
            assert (h.home / ".soulfleet" / "current").readlink().name == sha, out
    # The host left mid-install is not switched: current still names the old release.
    assert (victim.home / ".soulfleet" / "current").readlink().name != sha


def freeze_when_switched(lab, host, monkeypatch) -> dict:
    """Freeze `host` as soon as the controller has the switch's answer from it (the switch is
    done, the Hermes entry comes next). Watching `current` on the host instead raced the
    switch's own reply: a freeze between the rename and the answer is a different case (the
    controller cannot know the switch happened)."""
    happened: dict = {}
    run_task = Play.run_task

    def run_task_then_freeze(play, role, task):
        report = run_task(play, role, task)
        if (play.ctx.host == host.name and role.name == "switch" and task.name.startswith("switch")
                and report.outcome.changed and "at" not in happened):
            lab.freeze(host)
            happened["at"] = time.monotonic()
        return report

    monkeypatch.setattr(Play, "run_task", run_task_then_freeze)
    return happened


def test_a_host_lost_right_after_its_switch_is_shown_on_the_new_release_and_repaired_next_run(faults_lab, monkeypatch):
    """The recap used to read `h 0 0 0 1 <old sha>` for such a host, while its `current` already
    named the new release and Hermes' entry the old one."""
    lab, inventory, repo, targets = faults_lab
    sha = commit_file(repo, "runtime/soulgraph/_fault_marker.py", "MARK = 7\n", "a sha whose switch is cut off")
    victim = lab.hosts[0]
    happened = freeze_when_switched(lab, victim, monkeypatch)
    try:
        code, out = run_update("--yes", "-i", str(inventory), targets, sha, repo=repo)
    finally:
        lab.thaw(victim)
        monkeypatch.undo()
    assert "at" in happened and code == 4, out
    row = recap_rows(out)[victim.name]
    assert row[4] == sha[:12] and int(row[1]) >= 2, out  # the new sha, and the tasks it did counted
    assert f"{victim.name}: now on {sha[:12]}: `current` was switched before the host stopped answering" in out, out
    entry_left = "Hermes' soul entry was not rewritten" in out
    code, out = run_update("--yes", "-i", str(inventory), targets, sha, repo=repo)
    assert code == 0, out
    config = (victim.home / ".hermes" / "config.yaml").read_text()
    assert f"releases/{sha}/venv/bin/python" in config
    # The next run completes the entry and says it did (when the drop came before the entry).
    assert (f"{victim.name}: repaired: `current` already named {sha[:12]}" in out) == entry_left, out


def test_a_second_ctrl_c_exits_at_once_naming_the_abandoned_host(faults_lab, tmp_path):
    lab, inventory, repo, targets = faults_lab
    sha = commit_file(repo, "runtime/soulgraph/_fault_marker.py", "MARK = 2\n", "another sha")
    victim = lab.hosts[2]
    happened = freeze_when(lab, victim, victim.home / ".soulfleet" / "releases" / sha / "wheels")
    proc = subprocess.Popen([sys.executable, "-c", "from fleet.cli import fleet_update; fleet_update()",
                             "--repo", str(repo), "--yes", "-i", str(inventory), targets, sha],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=Path(__file__).parents[1])
    try:
        deadline = time.monotonic() + 180
        while "at" not in happened and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "at" in happened, "the host never began its venv task"
        time.sleep(1)
        proc.send_signal(signal.SIGINT)
        time.sleep(1)
        second = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        took = time.monotonic() - second
    finally:
        if proc.poll() is None:
            proc.kill()
        lab.thaw(victim)
    text = out.decode()
    assert proc.returncode == 130, text
    assert took < 5, (took, text)
    assert "Second Ctrl-C: exiting now; abandoned mid-task:" in text and f"  {victim.name}: after " in text, text


def test_an_invalid_config_fails_the_host_before_the_switch_and_no_gateway_restarts(faults_lab):
    """Issue 14, item 2: a config.yaml the installer cannot edit used to get the switch and the
    restart anyway, leaving current on the new release and the entry on the old one."""
    lab, inventory, repo, targets = faults_lab
    sha = commit_file(repo, "runtime/soulgraph/_fault_marker.py", "MARK = 3\n", "a third sha")
    broken = lab.hosts[0]
    config = broken.home / ".hermes" / "config.yaml"
    good = config.read_text()
    config.write_text(good + "mcp_servers: [this is: not valid\n")
    restarts = broken.home / "gateway-restarts"
    restarts_before = restarts.read_text() if restarts.exists() else ""
    before = (broken.home / ".soulfleet" / "current").readlink().name
    try:
        code, out = run_update("--hermes", "--yes", "-i", str(inventory), targets, sha, repo=repo)
        assert code == 2, out
        assert f"{broken.name}: import_check | Hermes config can take the new entry: failed" in out, out
        assert (broken.home / ".soulfleet" / "current").readlink().name == before  # not switched
        assert (restarts.read_text() if restarts.exists() else "") == restarts_before  # not restarted
        assert config.read_text().endswith("mcp_servers: [this is: not valid\n")  # left as it was
        for h in lab.hosts[1:3]:
            assert (h.home / ".soulfleet" / "current").readlink().name == sha, out
    finally:
        config.write_text(good)


def restart_count(host) -> int:
    log = host.home / "gateway-restarts"
    return len(log.read_text().splitlines()) if log.exists() else 0


# The last run of test_two_runs_at_once_never_split_the_fleet, made without --hermes: its sha, the
# gateway restart counts before it, its exit code and output. The next test goes on from it.
WITHOUT_HERMES: dict[str, tuple] = {}


def test_two_runs_at_once_never_split_the_fleet(faults_lab):
    """Issue 14, item 4: a second run while the first is under way fails each host clearly,
    naming the run that holds it, and changes nothing there; the first run finishes; once it is
    done, the lock is gone."""
    lab, inventory, repo, targets = faults_lab
    restarts = {h.name: restart_count(h) for h in lab.hosts[:3]}
    first = commit_file(repo, "runtime/soulgraph/_fault_marker.py", "MARK = 5\n", "first operator's sha")
    second = commit_file(repo, "runtime/soulgraph/_fault_marker.py", "MARK = 6\n", "second operator's sha")
    watched = lab.hosts[0].home / ".soulfleet" / "releases" / first / "wheels"
    proc = subprocess.Popen([sys.executable, "-c", "from fleet.cli import fleet_update; fleet_update()",
                             "--repo", str(repo), "--yes", "-i", str(inventory), targets, first],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=Path(__file__).parents[1])
    try:
        deadline = time.monotonic() + 180
        while not watched.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert watched.exists(), "the first run never got under way"
        # The same inventory: the fleet-wide run lock turns the second run away before any host.
        locked, locked_out = run_update("--yes", "-i", str(inventory), targets, second, repo=repo)
        # Another inventory file naming the same hosts gets past it: each host's own lock holds.
        other = inventory.with_name("inventory-copy.yml")
        other.write_text(inventory.read_text())
        code, out = run_update("--yes", "-i", str(other), targets, second, repo=repo)
        first_out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, first_out.decode()
    assert locked == 75, locked_out
    assert "another fleet run holds the run lock for " in locked_out and f"pid {proc.pid}, " in locked_out, locked_out
    assert code == 2, out
    assert f"another fleet run holds {lab.hosts[0].name}: " in out and f"pid {proc.pid} since " in out, out
    assert f"(update {first[:12]})" in out
    for h in lab.hosts[:3]:
        assert (h.home / ".soulfleet" / "current").readlink().name == first
        assert not (h.home / ".soulfleet" / "releases" / second).exists()
    code, out = run_update("--yes", "-i", str(inventory), targets, second, repo=repo)
    assert code == 0, out
    WITHOUT_HERMES["run"] = (second, restarts, code, out)


def test_a_missed_gateway_restart_is_made_up_by_the_next_hermes_run(faults_lab):
    """Issue 14, item 3: a run without --hermes switched the runtime; the next --hermes run,
    with nothing else to change, still restarts the gateway onto it, once. The run without
    --hermes is the last one of the test before (a new sha on every host); on its own, this
    test makes one."""
    lab, inventory, repo, targets = faults_lab
    hosts = lab.hosts[:3]
    if "run" in WITHOUT_HERMES:
        sha, before, code, out = WITHOUT_HERMES.pop("run")
    else:
        sha = commit_file(repo, "runtime/soulgraph/_fault_marker.py", "MARK = 4\n", "a fourth sha")
        before = {h.name: restart_count(h) for h in hosts}
        code, out = run_update("--yes", "-i", str(inventory), targets, sha, repo=repo)
    assert all((h.home / ".soulfleet" / "current").readlink().name == sha for h in hosts), out
    assert code == 0 and {h.name: restart_count(h) for h in hosts} == before, out

    code, out = run_update("--hermes", "--yes", "-i", str(inventory), targets, sha, repo=repo)
    assert code == 0, out
    assert out.count("gateway | gateway runs this runtime: changed") == 3, out
    assert {h.name: restart_count(h) for h in hosts} == {n: c + 1 for n, c in before.items()}
    assert all((h.home / ".soulfleet" / "gateway-runtime").read_text() == sha + "\n" for h in hosts)

    code, out = run_update("--hermes", "--yes", "-i", str(inventory), targets, sha, repo=repo)
    assert code == 0 and "restart gateway: ok" not in out and "restarted:" not in out, out
    assert {h.name: restart_count(h) for h in hosts} == {n: c + 1 for n, c in before.items()}

    code, out = run_update("--restart-gateway", "--yes", "-i", str(inventory), targets, sha, repo=repo)
    assert code == 0, out
    # The reason given is the flag, not a restart onto the sha the gateway already runs.
    assert out.count("gateway | gateway restart asked for: changed — restarted because --restart-gateway "
                     "asks for it (it last ran this runtime)") == 3, out
    assert "last restarted onto" not in out, out
    assert {h.name: restart_count(h) for h in hosts} == {n: c + 2 for n, c in before.items()}
