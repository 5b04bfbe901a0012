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
