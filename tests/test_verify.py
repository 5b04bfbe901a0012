"""fleet.verify on the SSH lab: a host laid out by hand passes; each broken piece fails by name.

Two lab hosts get the real layout (runtime venv from a shipped wheelhouse, `current`, the Hermes
entry, soul.json, SKILL.md); each case breaks one thing on the first and restores it afterwards,
so the second host shows that one host's failure leaves the others' verdicts alone.
"""

from __future__ import annotations

import dataclasses
import io
import platform
import posixpath
import re
import shlex
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fleet.build import REPO, RuntimeBuilder, resolve_sha
from fleet.verify import (EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE, VerifyTarget, backend, run_verify)
from tests.host_layout import (HOST_PYTHON, build_wheelhouse, connect, install_into_hermes, lay_out_host,
                               switch_current)
from tests.lab import FakeCommand, Lab

pytestmark = pytest.mark.lab

SHA = "5e1f0c0ffee5e1f0c0ffee5e1f0c0ffee5e1f0c0"
CHECKS = ["runtime_imports", "vectors", "current_release", "mcp_entry", "memory_provider", "soul_file_private", "skill_present",
          "mcp_tools", "layered_soul"]
# No layered soul imported on these hosts, and no soul_embed.
PASSED = {c: "ok" for c in CHECKS} | {"layered_soul": "skip", "vectors": "skip"}


def runtime_wheelhouse() -> Path:
    """The wheels to lay the hosts out with. When runtime/ is exactly as committed, the fleet's
    own build cache holds them already (~/.cache/soulfleet, keyed by the commit: the runtime wheel
    and its dependencies, for this Linux and the hosts' /usr/bin/python3), as every fleet test
    before this module left it; else host_layout builds the working tree's."""
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=all", "--", "runtime"],
                           capture_output=True, text=True, timeout=60)
    if dirty.returncode != 0 or dirty.stdout.strip():
        return build_wheelhouse()
    python = subprocess.run([HOST_PYTHON, "-S", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                            capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    return RuntimeBuilder(resolve_sha("HEAD", REPO), REPO).wheelhouse("linux", platform.machine(), python)


@pytest.fixture(scope="module")
def laid_out(_ssh_lab_session: Lab):
    """Hosts 0 and 1 laid out at SHA (slow: built once per test module)."""
    lab = _ssh_lab_session
    wheelhouse = runtime_wheelhouse()
    hosts = lab.hosts[:2]
    lab.heal()
    for h in hosts:  # whatever other test modules left in these homes goes first (as root:
        for folder in (".soulfleet", ".hermes"):  # a test may have left root-owned files there)
            shutil.rmtree(h.home / folder, ignore_errors=True)
    with ThreadPoolExecutor(len(hosts)) as pool:
        paths = list(pool.map(lambda h: lay_out_host(h, wheelhouse, SHA), hosts))
    return dict(zip([h.name for h in hosts], paths))


def targets(lab: Lab, names, known_hosts=None) -> list[VerifyTarget]:
    return [VerifyTarget(h.name, h.address, h.port, h.user, str(lab.key),
                         str(known_hosts or lab.known_hosts))
            for h in lab.hosts if h.name in names]


def verify(lab, laid_out, *, hermes=False, sha=SHA, known_hosts=None):
    out = io.StringIO()
    rc = run_verify(targets(lab, laid_out, known_hosts), hermes=hermes, sha=sha, out=out)
    sys.stdout.write(out.getvalue())  # shown by pytest when a test fails
    return rc, out.getvalue()


def row(output: str, host: str) -> dict[str, str]:
    """The summary table's cells for one host, by column."""
    lines = output.splitlines()
    spans = [m.span() for m in re.finditer(r"-+", lines[1])]  # the rule under the header
    cut = lambda line: [line[a:b].strip() for a, b in spans]
    for line in lines[2:]:
        cells = cut(line.ljust(spans[-1][1]))
        if cells[0] == host:
            return dict(zip(cut(lines[0]), cells))
    raise AssertionError(f"{host} not in the table:\n{output}")


def run_as(lab_host, command: str) -> None:
    with connect(lab_host) as conn:
        conn.run(command, check=True)


# -- passing -------------------------------------------------------------------------------------

def test_laid_out_hosts_pass_every_check(ssh_lab, laid_out):
    rc, output = verify(ssh_lab, laid_out)
    assert rc == EXIT_OK, output
    for name in laid_out:
        assert row(output, name) == {"host": name, **PASSED}
    assert "gateway_active" not in output  # only with hermes=True
    assert "2/2 hosts passed every check" in output


def test_without_a_sha_current_only_has_to_be_a_release(ssh_lab, laid_out):
    rc, output = verify(ssh_lab, laid_out, sha=None)
    assert rc == EXIT_OK, output


# -- one broken thing per case -------------------------------------------------------------------

def test_soul_file_with_wrong_mode_fails(ssh_lab, laid_out):
    first, second = list(laid_out)
    soul = shlex.quote(posixpath.join(laid_out[first]["hermes_home"], "soul.json"))
    run_as(ssh_lab.host(first), f"chmod 0644 {soul}")
    try:
        rc, output = verify(ssh_lab, laid_out)
    finally:
        run_as(ssh_lab.host(first), f"chmod 0600 {soul}")
    assert rc == EXIT_FAILED
    assert row(output, first)["soul_file_private"] == "FAIL"
    assert re.search(rf"{first}: soul_file_private: .*soul\.json has mode 0644, expected 0600", output)
    assert set(row(output, second).values()) == {second, "ok", "skip"}


def test_missing_skill_fails(ssh_lab, laid_out):
    first, _ = list(laid_out)
    skill = shlex.quote(posixpath.join(laid_out[first]["hermes_home"], "skills/soul-graph/SKILL.md"))
    run_as(ssh_lab.host(first), f"mv {skill} {skill}.away")
    try:
        rc, output = verify(ssh_lab, laid_out)
    finally:
        run_as(ssh_lab.host(first), f"mv {skill}.away {skill}")
    assert rc == EXIT_FAILED
    assert row(output, first)["skill_present"] == "FAIL"
    assert f"{first}: skill_present: no " in output and "SKILL.md" in output


def test_entry_pointing_elsewhere_fails(ssh_lab, laid_out):
    first, _ = list(laid_out)
    paths = laid_out[first]
    with connect(ssh_lab.host(first)) as conn:
        install_into_hermes(conn, paths["hermes_home"], paths["python"], server_python="/usr/bin/python3")
        try:
            rc, output = verify(ssh_lab, laid_out)
        finally:
            install_into_hermes(conn, paths["hermes_home"], paths["python"])
    assert rc == EXIT_FAILED
    assert row(output, first)["mcp_entry"] == "FAIL"
    assert (f"{first}: mcp_entry: command is /usr/bin/python3, the deployed runtime's python is "
            f"{paths['runtime_dir']}/releases/{SHA}/venv/bin/python") in output
    assert row(output, first)["mcp_tools"] == "ok"  # the runtime itself is fine


def test_current_at_another_sha_fails(ssh_lab, laid_out):
    rc, output = verify(ssh_lab, laid_out, sha="f" * 40)
    assert rc == EXIT_FAILED
    for name in laid_out:
        assert row(output, name)["current_release"] == "FAIL"
        assert f"{name}: current_release: current points at " in output


def test_runtime_without_soulgraph_fails_import_and_tools(ssh_lab, laid_out):
    first, _ = list(laid_out)
    runtime_dir = laid_out[first]["runtime_dir"]
    empty = posixpath.join(runtime_dir, "releases", "empty")
    with connect(ssh_lab.host(first)) as conn:
        conn.run(f"/usr/bin/python3 -m venv --without-pip {shlex.quote(empty + '/venv')}", check=True)
        switch_current(conn, runtime_dir, "empty")
        try:
            rc, output = verify(ssh_lab, laid_out, sha=None)
        finally:
            switch_current(conn, runtime_dir, SHA)
    assert rc == EXIT_FAILED
    cells = row(output, first)
    assert (cells["runtime_imports"], cells["mcp_tools"], cells["mcp_entry"]) == ("FAIL",) * 3
    assert "cannot import soulgraph: ModuleNotFoundError: No module named 'soulgraph'" in output


# -- the self-check's record ----------------------------------------------------------------------

REUSED = "the MCP self-check recorded by an earlier verification"


def reused_hosts(output: str) -> str:
    return next((line for line in output.splitlines() if REUSED in line), "")


def test_a_passed_self_check_is_reused_until_what_it_depends_on_changes(ssh_lab, laid_out):
    first, second = list(laid_out)
    verify(ssh_lab, laid_out)  # records it on both hosts (when an earlier test has not)
    rc, output = verify(ssh_lab, laid_out)
    assert rc == EXIT_OK, output
    assert f"{first}, {second}:" in reused_hosts(output), output

    # The soul file saved again (a new inode, as every save makes): the first host runs it again.
    soul = laid_out[first]["hermes_home"] + "/soul.json"
    run_as(ssh_lab.host(first), f"cp -p {soul} {soul}.new && mv {soul}.new {soul}")
    rc, output = verify(ssh_lab, laid_out)
    assert rc == EXIT_OK, output
    assert f"mcp_tools: {second}:" in reused_hosts(output), output

    # A package file removed from the venv after the record: the check runs, and fails.
    site = laid_out[first]["runtime_dir"] + f"/releases/{SHA}/venv/lib"
    run_as(ssh_lab.host(first), f"f=$(ls -d {site}/python3*/site-packages/soulgraph/server/app.py) && mv $f $f.away")
    try:
        rc, output = verify(ssh_lab, laid_out)
    finally:
        run_as(ssh_lab.host(first), f"f=$(ls -d {site}/python3*/site-packages/soulgraph/server/app.py.away) && mv $f ${{f%.away}}")
    assert rc == EXIT_FAILED
    assert row(output, first)["mcp_tools"] == "FAIL" and row(output, second)["mcp_tools"] == "ok"
    assert first not in reused_hosts(output)


def test_full_runs_the_self_check_everywhere(ssh_lab, laid_out):
    verify(ssh_lab, laid_out)
    records = [ssh_lab.host(name).home / ".soulfleet" / "self-check.json" for name in laid_out]
    before = [r.stat().st_mtime_ns for r in records]
    out = io.StringIO()
    rc = run_verify(targets(ssh_lab, laid_out), hermes=False, sha=SHA, out=out, full=True)
    assert rc == EXIT_OK, out.getvalue()
    assert not reused_hosts(out.getvalue())
    assert all(r.stat().st_mtime_ns > b for r, b in zip(records, before))  # ran, and recorded anew
    assert oct(records[0].stat().st_mode & 0o777) == "0o600"


# -- host keys and reachability -------------------------------------------------------------------

def accepted_logins(lab_host) -> int:
    return lab_host.log_file.read_text(errors="replace").count(f"Accepted publickey for {lab_host.user}")


def test_changed_host_key_is_refused_not_warned_about(ssh_lab, laid_out):
    first, second = list(laid_out)
    ssh_lab.tamper_known_hosts(first)
    known_before = Path(ssh_lab.known_hosts).read_text()
    logins_before = accepted_logins(ssh_lab.host(first))
    rc, output = verify(ssh_lab, laid_out)
    assert rc == EXIT_UNREACHABLE
    assert row(output, first) == {"host": first, "runtime_imports": "key refused",
                                  **{c: "-" for c in CHECKS[1:]}}
    assert re.search(rf"{first}: key refused: {first} \(.*\): HOST KEY CHANGED", output)
    assert set(row(output, second).values()) == {second, "ok", "skip"}
    # Refused before logging in, and the impostor entry was not "corrected" behind our back.
    assert accepted_logins(ssh_lab.host(first)) == logins_before
    assert Path(ssh_lab.known_hosts).read_text() == known_before


def test_unknown_host_key_is_refused(ssh_lab, laid_out, tmp_path):
    first, second = list(laid_out)
    known = tmp_path / "known_hosts"
    lines = Path(ssh_lab.known_hosts).read_text().splitlines(keepends=True)
    known.write_text("".join(l for l in lines if not l.startswith(ssh_lab.host(first).address + " ")))
    rc, output = verify(ssh_lab, laid_out, known_hosts=known)
    assert rc == EXIT_UNREACHABLE
    assert re.search(rf"{first}: key refused: .*host key ssh-ed25519 SHA256:\S+ is not in {known}",
                     output)
    assert set(row(output, second).values()) == {second, "ok", "skip"}
    assert ssh_lab.host(first).address not in known.read_text()  # never added on first contact


def test_unreachable_host_is_reported_and_others_verified(ssh_lab, laid_out):
    first, second = list(laid_out)
    ssh_lab.stop(second)
    rc, output = verify(ssh_lab, laid_out)
    assert rc == EXIT_UNREACHABLE
    assert f"{second}: unreachable: {second} ({ssh_lab.host(second).address}:22) is unreachable" in output
    assert set(row(output, first).values()) == {first, "ok", "skip"}


# -- the gateway (hermes=True) ---------------------------------------------------------------------

# What `hermes memory status` prints with our provider active (hermes-agent 0.19; the real
# command's output is checked in tests/test_install_provider.py).
MEMORY_STATUS = "\nMemory status\n" + "-" * 40 + "\n  Built-in:  always active\n  Provider:  soulgraph\n\n" \
    "  Plugin:    installed \u2713\n  Status:    available \u2713\n"
# And `hermes mcp test soul` (the real command's output: tests/test_hermes_client.py).
MCP_TEST = "  Testing 'soul'...\n  Transport: stdio\n  Auth: none\n  \u2713 Connected (784ms)\n  \u2713 Tools discovered: 13\n"
HERMES_OK = {"systemctl": FakeCommand(stdout="active\n"),
             "hermes": FakeCommand(stdout=MEMORY_STATUS, by_args={"mcp test soul": MCP_TEST})}


def test_gateway_active_passes_with_hermes(ssh_lab, laid_out):
    first, second = list(laid_out)
    for name in laid_out:
        ssh_lab.fake_commands(name, HERMES_OK)
    rc, output = verify(ssh_lab, laid_out, hermes=True)
    assert rc == EXIT_OK, output
    assert row(output, first)["gateway_active"] == "ok" and row(output, first)["hermes_memory_provider"] == "ok"
    assert ["systemctl", "--user", "is-active", "hermes-gateway.service"] in ssh_lab.fake_calls(first)
    assert ["hermes", "memory", "status"] in ssh_lab.fake_calls(first)
    assert ["hermes", "mcp", "test", "soul"] in ssh_lab.fake_calls(first)
    assert row(output, first)["hermes_client_sees_soul"] == "ok"


HERMES_REUSED = "Hermes' own answers recorded by an earlier verification"


def test_hermes_client_answers_are_reused_until_what_they_depend_on_changes(ssh_lab, laid_out):
    """`verify --hermes` started Hermes' CLI twice a host on every run (11x `fleet status` on 8
    hosts); its answers are now kept like the self-check's, and asked again when Hermes' config,
    the plugin, the release or the Hermes install changed, or with --full."""
    first, second = list(laid_out)
    for name in laid_out:
        ssh_lab.fake_commands(name, HERMES_OK)
    calls = lambda name: sum(c[:1] == ["hermes"] for c in ssh_lab.fake_calls(name))  # noqa: E731
    verify(ssh_lab, laid_out, hermes=True)  # records them
    before = {name: calls(name) for name in laid_out}
    rc, output = verify(ssh_lab, laid_out, hermes=True)
    assert rc == EXIT_OK, output
    assert {name: calls(name) for name in laid_out} == before  # Hermes not started again
    assert row(output, first)["hermes_client_sees_soul"] == "ok" and row(output, first)["hermes_memory_provider"] == "ok"
    assert f"{first}, {second}:" in next(l for l in output.splitlines() if HERMES_REUSED in l), output

    # The user edits config.yaml on the first host: Hermes is asked again there, not on the second.
    config = laid_out[first]["hermes_home"] + "/config.yaml"
    run_as(ssh_lab.host(first), f"printf '# edited\\n' >> {config}")
    rc, output = verify(ssh_lab, laid_out, hermes=True)
    assert rc == EXIT_OK, output
    assert calls(first) == before[first] + 2 and calls(second) == before[second]

    # --full asks Hermes everywhere.
    out = io.StringIO()
    assert run_verify(targets(ssh_lab, laid_out), hermes=True, sha=SHA, out=out, full=True) == EXIT_OK, out.getvalue()
    assert calls(second) == before[second] + 2 and HERMES_REUSED not in out.getvalue()


def test_hermes_client_finding_too_few_tools_fails_in_one_sentence(ssh_lab, laid_out):
    first, second = list(laid_out)
    ssh_lab.fake_commands(first, {**HERMES_OK, "hermes": FakeCommand(stdout=MEMORY_STATUS, by_args={
        "mcp test soul": MCP_TEST.replace("discovered: 13", "discovered: 4")})})
    ssh_lab.fake_commands(second, HERMES_OK)
    rc, output = verify(ssh_lab, laid_out, hermes=True)
    assert rc == EXIT_FAILED
    assert f"{first}: hermes_client_sees_soul: hermes mcp test soul found 4 tools, expected 13" in output


def test_a_custom_gateway_is_checked_with_the_inventorys_status_command(ssh_lab, laid_out):
    """Issue 14: with gateway_restart_command, status used to say inactive; now
    gateway_status_command is asked (and without one the check says it cannot tell)."""
    first, second = list(laid_out)
    for name in laid_out:
        ssh_lab.fake_commands(name, HERMES_OK)
    custom = {"gateway_restart_command": "s6-svc -r /run/s6/hermes", "gateway_status_command": "s6-svstat -u /run/s6/hermes"}
    ssh_lab.fake_commands(first, {**HERMES_OK, "s6-svstat": FakeCommand(stdout="true\n")})
    out = io.StringIO()
    chosen = [dataclasses.replace(t, gateway=custom) if t.name == first else
              dataclasses.replace(t, gateway={"gateway_restart_command": "s6-svc -r /run/s6/hermes"})
              for t in targets(ssh_lab, list(laid_out))]
    run_verify(chosen, hermes=True, sha=SHA, out=out)
    assert row(out.getvalue(), first)["gateway_active"] == "ok", out.getvalue()
    assert ["s6-svstat", "-u", "/run/s6/hermes"] in ssh_lab.fake_calls(first)
    assert ["systemctl", "--user", "is-active", "hermes-gateway.service"] not in ssh_lab.fake_calls(first)
    assert row(out.getvalue(), second)["gateway_active"] == "skip", out.getvalue()


def test_hermes_showing_another_provider_fails_the_memory_check(ssh_lab, laid_out):
    first, second = list(laid_out)
    ssh_lab.fake_commands(first, {**HERMES_OK, "hermes": FakeCommand(stdout=MEMORY_STATUS.replace(
        "Provider:  soulgraph", "Provider:  (none \u2014 built-in only)"))})
    ssh_lab.fake_commands(second, HERMES_OK)
    rc, output = verify(ssh_lab, laid_out, hermes=True)
    assert rc == EXIT_FAILED
    assert f"{first}: hermes_memory_provider: hermes memory status shows provider" in output
    assert row(output, second)["hermes_memory_provider"] == "ok"


def test_gateway_inactive_fails_with_hermes(ssh_lab, laid_out):
    first, second = list(laid_out)
    ssh_lab.fake_commands(first, {**HERMES_OK, "systemctl": FakeCommand(stdout="inactive\n", rc=3)})
    ssh_lab.fake_commands(second, HERMES_OK)
    rc, output = verify(ssh_lab, laid_out, hermes=True)
    assert rc == EXIT_FAILED
    assert f"{first}: gateway_active: the gateway (hermes-gateway.service) is not running: inactive" in output
    assert row(output, second)["gateway_active"] == "ok"


def test_gateway_on_macos_asks_launchd_falling_back_to_the_user_domain(ssh_lab, laid_out):
    first, _ = list(laid_out)
    uid = str(ssh_lab.host(first).home.stat().st_uid)
    ssh_lab.fake_commands(first, {
        "uname": FakeCommand(stdout="Darwin\n"),
        # No GUI session over SSH: gui/<uid> is unknown, user/<uid> has the running agent.
        "launchctl":
        f'[ "$2" = user/{uid}/ai.hermes.gateway ] && {{ echo "state = running"; exit 0; }}\n'
        'echo "Could not find service" >&2; exit 113\n',
    })
    out = io.StringIO()
    run_verify(targets(ssh_lab, [first]), hermes=True, sha=SHA, out=out)
    print(out.getvalue())
    # Only the gateway column is meaningful here: testinfra picks BSD file commands for "Darwin".
    assert row(out.getvalue(), first)["gateway_active"] == "ok"
    launchctl = [argv for argv in ssh_lab.fake_calls(first) if argv[0] == "launchctl"]
    assert launchctl == [["launchctl", "print", f"gui/{uid}/ai.hermes.gateway"],
                         ["launchctl", "print", f"user/{uid}/ai.hermes.gateway"]]


def test_a_hung_command_fails_its_check_instead_of_hanging_verify(ssh_lab, laid_out, monkeypatch):
    monkeypatch.setattr(backend, "COMMAND_TIMEOUT", 2.0)
    first, second = list(laid_out)
    ssh_lab.fake_commands(first, {"systemctl": "sleep 600"})
    ssh_lab.fake_commands(second, HERMES_OK)
    started = time.monotonic()
    rc, output = verify(ssh_lab, laid_out, hermes=True)
    assert time.monotonic() - started < 60
    assert rc == EXIT_FAILED
    assert f"{first}: gateway_active:" in output and "did not finish in 2 s" in output
    assert row(output, second)["gateway_active"] == "ok"
