"""The installer's record (runtime/soulgraph/hermes/install_record.py) read back by the fleet's
shell (fleet/operations/module_record.py): it holds after a run, and stops holding when any
file the installer manages changes, when soul.json appears or goes, or for other arguments."""

from __future__ import annotations

import io
import os
import subprocess
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from fleet.operations.module_record import holds, read_command
from soulgraph.hermes import install_record
from soulgraph.hermes.install import main as install_main


def install(home: Path, *extra: str) -> list[str]:
    argv = ["--hermes-home", str(home), *extra]
    with redirect_stdout(io.StringIO()):
        assert install_main(argv) == 0
    return argv


def record_holds(home: Path, argv: list[str]) -> bool:
    # The same shell command the fleet runs on a host, here on this machine.
    result = subprocess.run(["sh", "-c", read_command(str(install_record.record_path(home)))],
                            capture_output=True, text=True, timeout=30)
    return result.returncode == 0 and holds(result.stdout, argv)


@pytest.fixture
def home(tmp_path) -> Path:
    home = tmp_path / "hermes"
    home.mkdir()
    (home / "config.yaml").write_text("model:\n  default: test-model\n")
    return home


def test_holds_after_a_run_for_the_same_args_only(home):
    argv = install(home)
    assert record_holds(home, argv)
    assert not record_holds(home, argv + ["--toolsets", "graph,memory"])
    assert not record_holds(home, ["--hermes-home", str(home), "--python", "/other/venv/bin/python"])


@pytest.mark.parametrize("change", [
    "config edited", "config replaced", "skill removed", "plugin file edited", "plugin file added",
    "soul.json removed", "config mode", "our skill folder gains a file"])
def test_any_change_to_what_it_manages_breaks_it(home, change):
    argv = install(home)
    config, skill = home / "config.yaml", home / "skills" / "soul-graph" / "SKILL.md"
    plugin = home / "plugins" / "soulgraph"
    if change == "config edited":  # in place, same inode, another size
        with open(config, "a") as f:
            f.write("# edited\n")
    elif change == "config replaced":  # same size, new inode (as an editor saving aside does)
        text = config.read_text()
        (home / "c.tmp").write_text(text.replace("test-model", "tset-model"))
        os.replace(home / "c.tmp", config)
    elif change == "skill removed":
        skill.unlink()
    elif change == "plugin file edited":
        path = plugin / "settings.json"
        path.write_text(path.read_text() + " ")
    elif change == "plugin file added":
        (plugin / "extra.py").write_text("")
    elif change == "soul.json removed":
        (home / "soul.json").unlink()
    elif change == "config mode":
        config.chmod(0o600)
    elif change == "our skill folder gains a file":
        (skill.parent / "notes.md").write_text("")
    assert not record_holds(home, argv), change
    install(home)  # the installer runs again, and its new record holds
    assert record_holds(home, argv)


def test_the_agent_writing_its_soul_file_or_other_skills_keeps_it(home):
    argv = install(home)
    soul = home / "soul.json"
    soul.write_text(soul.read_text())  # rewritten: only its existence counts
    (home / "skills" / "imported-skill").mkdir()  # a layered soul's skills come and go
    assert record_holds(home, argv)


def test_a_run_that_changes_nothing_leaves_the_record_as_it_was(home):
    install(home)
    record = install_record.record_path(home)
    written = record.stat().st_mtime_ns
    install(home)
    assert record.stat().st_mtime_ns == written


def test_no_record_after_a_check_an_error_or_a_removal(home):
    assert not record_holds(home, ["--hermes-home", str(home)])  # none yet
    install(home, "--check")
    assert not install_record.record_path(home).exists()
    argv = install(home)
    install(home, "--remove")
    assert not install_record.record_path(home).exists()
    assert not record_holds(home, argv)
    install(home)
    (home / "config.yaml").write_text("mcp_servers: [not, a, mapping]\n")
    with redirect_stdout(io.StringIO()):
        assert install_main(["--hermes-home", str(home)]) == 1
    assert not install_record.record_path(home).exists()


def test_a_garbled_record_does_not_hold(home):
    argv = install(home)
    path = install_record.record_path(home)
    path.write_text(path.read_text().replace("\t", " ", 3))
    assert not record_holds(home, argv)
    path.write_text("")
    assert not record_holds(home, argv)
