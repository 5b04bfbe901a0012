"""The operator package installed as a user would (issue 14, item 9): a wheel of this repository
in a fresh venv, its `fleet-update` run from a checkout, and a clear refusal anywhere else."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fleet_helpers import clone_repo

REPO = Path(__file__).resolve().parents[1]


def run(*args, cwd=None, env=None, timeout=600):
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_a_pip_installed_fleet_update_works_from_a_checkout_and_refuses_elsewhere(tmp_path):
    wheels = tmp_path / "wheels"
    built = run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", wheels, REPO)
    assert built.returncode == 0, built.stderr
    venv = tmp_path / "operator"
    made = run(sys.executable, "-m", "venv", venv)
    assert made.returncode == 0, made.stderr
    # Dependencies from this test venv's own wheels would need an index; the operator's venv
    # sees them through a .pth file instead (what it installs itself is only the wheel).
    site = run(venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    ours = run(sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    Path(site, "test-deps.pth").write_text(ours + "\n")
    wheel = next(wheels.glob("soulfleet-*.whl"))
    installed = run(venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel)
    assert installed.returncode == 0, installed.stderr
    fleet_update = venv / "bin" / "fleet-update"
    # Anywhere but a checkout: a clear refusal, exit 1.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    refused = run(fleet_update, "--check", "local", cwd=elsewhere)
    assert refused.returncode == 1
    assert f"{elsewhere} is not a git repository: the runtime is built from a commit of the soulfleet repository" \
        in refused.stderr
    # From a checkout: the whole check run, with the roles shipped inside the package.
    checkout = clone_repo(tmp_path / "checkout")
    home = tmp_path / "hermes"
    home.mkdir()
    (home / "config.yaml").write_text("model:\n  default: x\n")
    # A home of its own: what the check reports must not depend on whether this machine already
    # runs a release (./run-local leaves one in ~/.soulfleet; with it, the Hermes role's dry run
    # is made by that runtime instead).
    user_home = tmp_path / "home"
    user_home.mkdir()
    # The build cache stays the operator's own (SOULFLEET_CACHE, as fleet/build.py reads it): the
    # runtime's wheelhouse is keyed by its sha and content, so a fresh HOME would only fetch the same
    # wheels again.
    cache = os.environ.get("SOULFLEET_CACHE") or str(Path("~/.cache/soulfleet").expanduser())
    env = {**os.environ, "HOME": str(user_home), "HERMES_HOME": str(home),
           "SOULFLEET_CACHE": cache}  # check mode: nothing is written
    checked = run(fleet_update, "--check", "local", cwd=checkout, env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for line in (f"local: runtime | releases folder: changed — would create {user_home}/.soulfleet/releases",
                 "local: runtime | release venv from the shipped wheelhouse: changed — would ship",
                 "local: hermes | soul graph in Hermes: changed — would run soulgraph.install (its runtime is not "
                 "installed yet)"):
        assert line in checked.stdout, checked.stdout
    assert not (user_home / ".soulfleet").exists() and (home / "config.yaml").read_text() == "model:\n  default: x\n"
    imported = run(venv / "bin" / "python", "-c", "import fleet.roles as r; print(r.ROLES_DIR)", cwd=elsewhere)
    assert "site-packages/fleet/roles_data" in imported.stdout, imported.stdout + imported.stderr
