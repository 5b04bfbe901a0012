"""The embedded default: `fleet-update --yes local` on this machine, no SSH (./run-local)."""

from __future__ import annotations

from fleet.build import cache_root
from tests.fleet_helpers import MINIMAL_CONFIG, run_update


def test_local_deploy_then_nothing_to_do(tmp_path, monkeypatch):
    hermes = tmp_path / "hermes"
    hermes.mkdir()
    (hermes / "config.yaml").write_text(MINIMAL_CONFIG)
    monkeypatch.setenv("SOULFLEET_CACHE", str(cache_root()))  # keep the session's build cache
    monkeypatch.setenv("HOME", str(tmp_path))  # the runtime goes to ~/.soulfleet
    monkeypatch.setenv("HERMES_HOME", str(hermes))
    code, out = run_update("--yes", "local")
    assert code == 0, out
    current = tmp_path / ".soulfleet" / "current"
    assert current.is_symlink()
    python = f"{tmp_path}/.soulfleet/releases/{current.readlink().name}/venv/bin/python"
    assert f"command: {python}" in (hermes / "config.yaml").read_text()
    code, out = run_update("--yes", "local")
    assert code == 0 and "local: OK" in out, out
    code, out = run_update("--yes", "local", "no-such-ref")
    assert code == 1 and "is not a commit" in out


def test_run_local_without_hermes_says_so_and_exits_3(tmp_path):
    """On a machine without Hermes, ./run-local deploys the runtime, then says Hermes is missing
    and how to install it, and exits 3 (it used to exit 0 with "ok": true for a soul file that
    did not exist)."""
    import os
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, HOME=str(tmp_path), HERMES_HOME=str(tmp_path / "no-hermes"),
               SOULFLEET_CACHE=str(cache_root()))
    proc = subprocess.run([str(root / "run-local")], cwd=root, env=env, capture_output=True, text=True,
                          timeout=900, stdin=subprocess.DEVNULL)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "Hermes is not installed here" in proc.stderr and "pipx install 'hermes-agent[mcp]'" in proc.stderr
    assert '"ok": true' not in proc.stdout
    assert (tmp_path / ".soulfleet" / "current").is_symlink()  # the runtime itself was deployed
    assert not (tmp_path / "no-hermes" / "soul.json").exists()
