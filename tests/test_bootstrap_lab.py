"""`fleet bootstrap` on Linux lab hosts (issue 14, item 5): it finds the Hermes the host has and
writes the gateway unit for it, enables the unit with or without --hermes, enables lingering when
allowed and reports it as a problem when not, leaves Hermes' own unit alone, writes nothing for a
host with its own gateway_restart_command, and refuses a host with no Hermes.

systemd --user and logind do not run in the lab: `systemctl` and `loginctl` are stand-ins that
record their calls (tests/lab.py fake_commands). What this does not prove: that a real user
manager starts the unit, or that logind honours the linger flag (docs/fleet.md).

Each test's `fleet bootstrap` run has hosts and an inventory of its own; the three runs are made
at once by the `runs` fixture (each is mostly one host's venv, so together they use both cores
instead of one after the other), and each test checks its own run."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.build import RuntimeBuilder, resolve_sha
from tests.fleet_helpers import clone_repo, reset_to_bare_hermes
from tests.lab import FakeCommand
from tests.test_fleet_lab import install_fake_hermes

pytestmark = pytest.mark.lab
SYSTEMCTL = 'case "$*" in *is-enabled*) exit 1;; esac; exit 0\n'  # nothing enabled yet


@pytest.fixture(scope="module")
def boot_lab(_ssh_lab_session, tmp_path_factory):
    lab = _ssh_lab_session
    reset_to_bare_hermes(lab)
    root = tmp_path_factory.mktemp("bootstrap")
    repo = clone_repo(root / "repo")
    yield lab, root, repo, resolve_sha("HEAD", repo)
    lab.heal()


def unit(host):
    return host.home / ".config" / "systemd" / "user" / "hermes-gateway.service"


OWN_UNIT = "[Unit]\nDescription=Hermes (installed by hermes gateway install)\n[Service]\nExecStart=/opt/hermes/run\n"


def pipx_python(host):
    return host.home / ".local" / "pipx" / "venvs" / "hermes-agent" / "bin" / "python"


def prepare_lingering_refused(lab, root):
    """Host 1: Hermes installed with pipx; enable-linger is refused (no polkit here)."""
    host = lab.hosts[0]
    install_fake_hermes(host, pipx_python(host))
    lab.fake_commands(host, {"systemctl": SYSTEMCTL,
                             "loginctl": 'case "$1" in enable-linger) echo "Access denied" >&2; exit 1;; '
                                         '*) echo Linger=no;; esac\n'})
    return lab.write_inventory(root / "one.yml", groups={"workers": [host.name]}), [host.name]


def prepare_hermes_own_unit(lab, root):
    """Host 2: Hermes in ~/.hermes/hermes-agent, with the unit `hermes gateway install` wrote."""
    host = lab.hosts[1]
    install_fake_hermes(host, host.home / ".hermes" / "hermes-agent" / "venv" / "bin" / "python")
    unit(host).parent.mkdir(parents=True, exist_ok=True)
    unit(host).write_text(OWN_UNIT)
    lab.fake_commands(host, {"systemctl": SYSTEMCTL, "loginctl": FakeCommand(stdout="Linger=yes\n")})
    return lab.write_inventory(root / "two.yml", groups={"workers": [host.name]}), [host.name]


def prepare_bare_and_custom(lab, root):
    """Host 3 has no Hermes; host 4 has its own gateway_restart_command."""
    bare, custom = lab.hosts[2], lab.hosts[3]
    inventory = lab.write_inventory(root / "three.yml", groups={"workers": [bare.name, custom.name]},
                                    host_vars={custom.name: {"gateway_restart_command": "true"}})
    return inventory, [bare.name, custom.name]


CASES = {"lingering refused": prepare_lingering_refused, "Hermes' own unit": prepare_hermes_own_unit,
         "no Hermes, own restart": prepare_bare_and_custom}


@pytest.fixture(scope="module")
def runs(boot_lab):
    """(exit code, output) of each case's `fleet bootstrap --yes --repo REPO --sha SHA -i INV HOSTS`,
    the real CLI in a process of its own, all three started together. The runtime's wheelhouse is
    built (or found in the cache) first, as the first run would otherwise do while the other two
    waited for it or built it again."""
    lab, root, repo, sha = boot_lab
    python = subprocess.run(["/usr/bin/python3", "-S", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                            capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    RuntimeBuilder(sha, repo).wheelhouse("linux", platform.machine(), python)
    procs = {}
    try:
        for case, prepare in CASES.items():
            inventory, names = prepare(lab, root)
            procs[case] = subprocess.Popen(
                [sys.executable, "-c", "from fleet.cli import fleet; fleet()", "bootstrap", "--yes",
                 "--repo", str(repo), "--sha", sha, "-i", str(inventory), *names],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=Path(__file__).parents[1])
        outputs = {case: proc.communicate(timeout=600)[0] for case, proc in procs.items()}
        return {case: (procs[case].returncode, out) for case, out in outputs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_bootstrap_writes_enables_and_reports_lingering(boot_lab, runs):
    lab, root, repo, sha = boot_lab
    host = lab.hosts[0]
    python = pipx_python(host)
    code, out = runs["lingering refused"]
    assert code == 0, out
    text = unit(host).read_text()
    assert f"ExecStart={python} -m hermes_cli.main gateway run" in text
    calls = lab.fake_calls(host)
    assert ["systemctl", "--user", "enable", "hermes-gateway.service"] in calls  # without --hermes
    assert ["loginctl", "enable-linger", host.user] in calls
    assert f"{host.name}: problem: bootstrap | lingering for the gateway's user: lingering is off" in out, out


def test_hermes_own_unit_is_used_as_it_is(boot_lab, runs):
    lab, root, repo, sha = boot_lab
    host = lab.hosts[1]
    code, out = runs["Hermes' own unit"]
    assert code == 0, out
    assert unit(host).read_text() == OWN_UNIT
    assert "gateway systemd user unit: skipped — when: not gateway_definition_theirs is false" in out, out
    assert "problem" not in out.split("HOST  ")[1]


def test_a_host_without_hermes_is_refused_and_one_with_its_own_restart_gets_no_unit(boot_lab, runs):
    lab, root, repo, sha = boot_lab
    bare, custom = lab.hosts[2], lab.hosts[3]
    code, out = runs["no Hermes, own restart"]
    assert code == 2, out
    assert f"{bare.name}: bootstrap | the installed Hermes: failed — no Hermes installation found here" in out
    assert not (bare.home / ".soulfleet" / "current").exists()  # stopped before the update
    assert not unit(custom).exists() and (custom.home / ".soulfleet" / "current").is_symlink()
