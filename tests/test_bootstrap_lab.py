"""`fleet bootstrap` on Linux lab hosts (issue 14, item 5): it finds the Hermes the host has and
writes the gateway unit for it, enables the unit with or without --hermes, enables lingering when
allowed and reports it as a problem when not, leaves Hermes' own unit alone, writes nothing for a
host with its own gateway_restart_command, and refuses a host with no Hermes.

systemd --user and logind do not run in the lab: `systemctl` and `loginctl` are stand-ins that
record their calls (tests/lab.py fake_commands). What this does not prove: that a real user
manager starts the unit, or that logind honours the linger flag (docs/fleet.md)."""

from __future__ import annotations

import pytest

from fleet.build import resolve_sha
from tests.fleet_helpers import clone_repo, reset_to_bare_hermes, run_fleet
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


def test_bootstrap_writes_enables_and_reports_lingering(boot_lab):
    lab, root, repo, sha = boot_lab
    host = lab.hosts[0]
    python = host.home / ".local" / "pipx" / "venvs" / "hermes-agent" / "bin" / "python"
    install_fake_hermes(host, python)
    # enable-linger is refused (no polkit here):
    lab.fake_commands(host, {"systemctl": SYSTEMCTL,
                             "loginctl": 'case "$1" in enable-linger) echo "Access denied" >&2; exit 1;; '
                                         '*) echo Linger=no;; esac\n'})
    inventory = lab.write_inventory(root / "one.yml", groups={"workers": [host.name]})
    code, out = run_fleet("bootstrap", "--yes", "--repo", str(repo), "--sha", sha, "-i", str(inventory), host.name)
    assert code == 0, out
    text = unit(host).read_text()
    assert f"ExecStart={python} -m hermes_cli.main gateway run" in text
    calls = lab.fake_calls(host)
    assert ["systemctl", "--user", "enable", "hermes-gateway.service"] in calls  # without --hermes
    assert ["loginctl", "enable-linger", host.user] in calls
    assert f"{host.name}: problem: bootstrap | lingering for the gateway's user: lingering is off" in out, out


def test_hermes_own_unit_is_used_as_it_is(boot_lab):
    lab, root, repo, sha = boot_lab
    host = lab.hosts[1]
    install_fake_hermes(host, host.home / ".hermes" / "hermes-agent" / "venv" / "bin" / "python")
    own = "[Unit]\nDescription=Hermes (installed by hermes gateway install)\n[Service]\nExecStart=/opt/hermes/run\n"
    unit(host).parent.mkdir(parents=True, exist_ok=True)
    unit(host).write_text(own)
    lab.fake_commands(host, {"systemctl": SYSTEMCTL, "loginctl": FakeCommand(stdout="Linger=yes\n")})
    inventory = lab.write_inventory(root / "two.yml", groups={"workers": [host.name]})
    code, out = run_fleet("bootstrap", "--yes", "--repo", str(repo), "--sha", sha, "-i", str(inventory), host.name)
    assert code == 0, out
    assert unit(host).read_text() == own
    assert "gateway systemd user unit: skipped — when: not gateway_definition_theirs is false" in out, out
    assert "problem" not in out.split("HOST  ")[1]


def test_a_host_without_hermes_is_refused_and_one_with_its_own_restart_gets_no_unit(boot_lab):
    lab, root, repo, sha = boot_lab
    bare, custom = lab.hosts[2], lab.hosts[3]
    inventory = lab.write_inventory(root / "three.yml", groups={"workers": [bare.name, custom.name]},
                                    host_vars={custom.name: {"gateway_restart_command": "true"}})
    code, out = run_fleet("bootstrap", "--yes", "--repo", str(repo), "--sha", sha, "-i", str(inventory),
                          bare.name, custom.name)
    assert code == 2, out
    assert f"{bare.name}: bootstrap | the installed Hermes: failed — no Hermes installation found here" in out
    assert not (bare.home / ".soulfleet" / "current").exists()  # stopped before the update
    assert not unit(custom).exists() and (custom.home / ".soulfleet" / "current").is_symlink()
