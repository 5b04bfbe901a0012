"""fleet.verify without the lab: the local target, the summary, target validation."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.verify import EXIT_FAILED, EXIT_OK, VerifyTarget, run_verify
from fleet.verify.report import FAIL, OK, VerifyReport

SHA = "c0ffee"


@pytest.fixture
def local_layout(tmp_path):
    """The layout on this machine; the release's venv is the dev venv (it imports soulgraph)."""
    runtime_dir, hermes_home = tmp_path / "soulfleet", tmp_path / "hermes"
    release = runtime_dir / "releases" / SHA
    release.mkdir(parents=True)
    (release / "venv").symlink_to(Path(sys.prefix))
    (runtime_dir / "current").symlink_to(f"releases/{SHA}")
    hermes_home.mkdir()
    (hermes_home / "config.yaml").write_text("model:\n  default: test\n")
    python = str(release / "venv" / "bin" / "python")
    subprocess.run([python, "-m", "soulgraph.install", "--hermes-home", str(hermes_home),
                    "--python", python], check=True, stdout=subprocess.DEVNULL)
    return VerifyTarget("local", local=True, hermes_home=str(hermes_home),
                        runtime_dir=str(runtime_dir))


def test_local_target_passes(local_layout):
    out = io.StringIO()
    assert run_verify([local_layout], hermes=False, sha=SHA, out=out) == EXIT_OK, out.getvalue()
    assert "1/1 hosts passed every check" in out.getvalue()


def test_local_target_names_the_failed_check(local_layout):
    os.chmod(Path(local_layout.hermes_home) / "soul.json", 0o640)
    out = io.StringIO()
    assert run_verify([local_layout], hermes=False, sha=SHA, out=out) == EXIT_FAILED
    assert "local: soul_file_private: " in out.getvalue()
    assert "has mode 0640, expected 0600" in out.getvalue()


def test_ssh_target_needs_known_hosts():
    with pytest.raises(ValueError, match="known_hosts"):
        VerifyTarget("web1", "10.0.0.5", 22, "deploy", "~/.ssh/id", None)


def test_no_hosts_is_not_an_error():
    assert run_verify([], hermes=False, out=io.StringIO()) == EXIT_OK


def test_summary_table_and_failure_lines():
    report = VerifyReport(["web1", "web2", "web3"])
    report.record("web1", "skill_present", OK)
    report.record("web1", "mcp_tools", FAIL, "the MCP server listed 12 tools, expected 13")
    report.record("web2", "skill_present", OK)
    report.record("web2", "mcp_tools", OK)
    report.mark_unreachable("web3", "web3 (10.0.0.7:22) is unreachable: refused", "unreachable")
    assert report.render() == (
        "host  skill_present  mcp_tools\n"
        "----  -------------  ---------\n"
        "web1  ok             FAIL\n"
        "web2  ok             ok\n"
        "web3  unreachable    -\n"
        "\n"
        "1/3 hosts passed every check\n"
        "failed:\n"
        "  web1: mcp_tools: the MCP server listed 12 tools, expected 13\n"
        "  web3: unreachable: web3 (10.0.0.7:22) is unreachable: refused\n")
