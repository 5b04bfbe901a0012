"""Fleet pieces without the lab: inventory, templates, roles, operations (with check mode),
service argv, the runner's exit codes. Operations run on this machine via LocalConnection."""

from __future__ import annotations

import os
import plistlib
import time
from pathlib import Path

import jinja2
import pytest
import yaml

from fleet import inventory as inv
from fleet.connections import LocalConnection
from fleet.deploy import HostResult
from fleet.facts import gather
from fleet.operations import CHANGED, FAILED, OK, REGISTRY, SKIPPED, Context
from fleet.operations.files import render_template
from fleet.operations.service import restart_argvs, restart_command
from fleet.roles import ROLES_DIR, Play, Role, RoleError, load_role, parse_tasks
from fleet.templating import render
from fleet.runner import exit_code, recap, run_hosts

INVENTORY = """
all:
  vars: {known_hosts: /k, python: /usr/bin/python3}
  children:
    hub:
      vars: {platform: macos, hermes_home: /Users/a/.hermes}
      hosts:
        mac1: {address: 10.0.0.1, user: a}
    workers:
      vars: {user: agent, runtime_dir: /opt/soul}
      children:
        gpu:
          vars: {runtime_dir: /gpu/soul}
          hosts:
            w2: {address: 10.0.0.3, port: 2222}
      hosts:
        w1: {address: 10.0.0.2, runtime_dir: /mine}
"""


# -- inventory ------------------------------------------------------------------------------

def test_inventory_inherits_group_vars_and_host_vars_win(tmp_path):
    path = tmp_path / "inv.yml"
    path.write_text(INVENTORY)
    inventory = inv.load(path)
    w1, w2, mac = inventory.hosts["w1"], inventory.hosts["w2"], inventory.hosts["mac1"]
    assert w1.vars["runtime_dir"] == "/mine"  # host var wins
    assert w2.vars["runtime_dir"] == "/gpu/soul"  # nearer group wins
    assert w2.vars["user"] == "agent" and w2.vars["port"] == 2222
    assert mac.vars["platform"] == "macos" and mac.vars["known_hosts"] == "/k"
    assert w1.vars["hermes_home"] == "~/.hermes"  # the default
    assert set(inventory.groups["workers"]) == {"w1", "w2"}
    assert "gpu" in w2.groups and "workers" in w2.groups


def test_accept_new_host_keys_is_explicit(tmp_path):
    from fleet.cli import _select
    path = tmp_path / "inv.yml"
    path.write_text(INVENTORY)
    strict = _select(str(path), "workers", None)
    trusting = _select(str(path), "workers", None, accept_new_host_keys=True)
    assert [h.connection().accept_new for h in strict] == [False, False]
    assert [h.connection().accept_new for h in trusting] == [True, True]


def test_targets_and_limit(tmp_path):
    inventory = inv.parse(yaml.safe_load(INVENTORY), tmp_path / "i.yml")
    names = lambda hosts: sorted(h.name for h in hosts)
    assert names(inventory.select("all")) == ["mac1", "w1", "w2"]
    assert names(inventory.select("workers")) == ["w1", "w2"]
    assert names(inventory.select("mac1,w2")) == ["mac1", "w2"]
    assert names(inventory.select("all", limit="w*")) == ["w1", "w2"]
    assert names(inventory.select("all", limit="gpu")) == ["w2"]
    local = inventory.select("local")
    assert local[0].local and local[0].vars["address"] == "localhost"
    with pytest.raises(inv.InventoryError, match="no host or group named 'nope' in .*i.yml"):
        inventory.select("nope")
    with pytest.raises(inv.InventoryError, match="--limit"):
        inventory.select("all", limit="zzz")


def test_local_uses_hermes_home_env(monkeypatch):
    monkeypatch.setenv("HERMES_HOME", "/srv/hermes")
    assert inv.empty().select("local")[0].vars["hermes_home"] == "/srv/hermes"
    monkeypatch.delenv("HERMES_HOME")
    assert inv.empty().select("local")[0].vars["hermes_home"] == "~/.hermes"


@pytest.mark.parametrize("text, message", [
    ("hosts: {}", "top level"),
    ("all: {hostz: {}}", "all: unknown key 'hostz'"),
    ("all: {children: {w: {hosts: [a, b]}}}", "all.children.w.hosts must be a mapping"),
    ("all: {hosts: {a: {port: x}}}", "host a: port must be a number"),
    ("all: {hosts: {a: {platform: windows}}}", "platform must be one of"),
    ("all: {hosts: {a: {'bad-key': 1}}}", "all.hosts.a: 'bad-key' is not a valid"),
])
def test_inventory_errors_name_file_and_key(tmp_path, text, message):
    path = tmp_path / "bad.yml"
    path.write_text(text)
    with pytest.raises(inv.InventoryError) as info:
        inv.load(path)
    assert str(path) in str(info.value) and message in str(info.value)


def test_example_inventory_loads():
    inventory = inv.load(Path(__file__).resolve().parent.parent / "inventory.example")
    assert {h.vars["platform"] for h in inventory.select("hub")} == {"macos"}
    assert inventory.select("workers")


# -- templates and roles --------------------------------------------------------------------

def test_template_undefined_variable_is_an_error(tmp_path):
    (tmp_path / "t.j2").write_text("home={{ hermes_home }} typo={{ hermes_hmoe }}\n")
    with pytest.raises(jinja2.UndefinedError, match="hermes_hmoe"):
        render_template(tmp_path, "t.j2", {"hermes_home": "/h"})
    with pytest.raises(jinja2.UndefinedError):
        render("{{ missing }}", {})


BOOTSTRAP_VARS = dict(host_name="mac1", hermes_home="/Users/a/.hermes", gateway_label="ai.hermes.gateway",
                      hermes_python="/Users/a/.hermes/hermes-agent/venv/bin/python",
                      gateway_log_dir="/Users/a/.hermes/logs")


def test_launchd_plist_from_template():
    text = render_template(ROLES_DIR / "bootstrap" / "templates", "ai.hermes.gateway.plist.j2",
                           BOOTSTRAP_VARS)
    plist = plistlib.loads(text.encode())
    assert plist["Label"] == "ai.hermes.gateway"
    assert plist["ProgramArguments"] == [BOOTSTRAP_VARS["hermes_python"], "-m", "hermes_cli.main",
                                         "gateway", "run"]
    assert plist["EnvironmentVariables"] == {"HERMES_HOME": "/Users/a/.hermes"}
    assert plist["RunAtLoad"] and plist["KeepAlive"]


def test_systemd_unit_from_template():
    text = render_template(ROLES_DIR / "bootstrap" / "templates", "hermes-gateway.service.j2",
                           BOOTSTRAP_VARS)
    assert f"ExecStart={BOOTSTRAP_VARS['hermes_python']} -m hermes_cli.main gateway run" in text
    assert "Environment=HERMES_HOME=/Users/a/.hermes" in text


def test_launchctl_and_systemctl_argv():
    assert restart_argvs("macos", 501, "hermes-gateway.service", "ai.hermes.gateway") == [
        ["launchctl", "kickstart", "-k", "gui/501/ai.hermes.gateway"],
        ["launchctl", "kickstart", "-k", "user/501/ai.hermes.gateway"]]
    assert restart_argvs("linux", 1000, "hermes-gateway.service", "x") == [
        ["systemctl", "--user", "restart", "hermes-gateway.service"]]
    assert restart_command("macos", 501, "u", "ai.hermes.gateway") == (  # and says which domain took it
        "{ launchctl kickstart -k gui/501/ai.hermes.gateway && echo gui/501; } || "
        "{ launchctl kickstart -k user/501/ai.hermes.gateway && echo user/501; }")
    assert restart_command("linux", 1, "u", "l", override="s6-svc -r /run/s6/hermes") == \
        "s6-svc -r /run/s6/hermes"


def test_every_role_parses():
    for name in ("runtime", "import_check", "switch", "hermes", "gateway", "bootstrap"):
        load_role(name)


def test_task_with_two_kinds_is_refused(tmp_path):
    with pytest.raises(RoleError, match="exactly one task kind"):
        parse_tasks("r", tmp_path / "tasks.yaml", [{"name": "x", "copy": {}, "command": {}}])
    with pytest.raises(RoleError, match="exactly one task kind"):
        parse_tasks("r", tmp_path / "tasks.yaml", [{"name": "x", "frobnicate": {}}])


def test_render_keeps_types_of_whole_expressions():
    assert render("{{ pkgs }}", {"pkgs": ["a", "b"]}) == ["a", "b"]
    assert render(["x-{{ n }}", {"k": "{{ n + 1 }}"}], {"n": 1}) == ["x-1", {"k": 2}]


def _role(tmp_path, tasks, handlers=()):
    return Role("r", tmp_path, parse_tasks("r", tmp_path / "t", list(tasks)), {},
                parse_tasks("r", tmp_path / "h", list(handlers)))


def test_handlers_run_once_and_only_when_notified(tmp_path):
    log = tmp_path / "log"
    handler = {"name": "h", "command": {"cmd": f"echo handled >> {log}"}}
    role = _role(tmp_path, [
        {"name": "a", "command": {"cmd": "true"}, "notify": "h"},
        {"name": "b", "command": {"cmd": "true"}, "notify": "h"},
        {"name": "c", "command": {"cmd": "true", "changed_when": False}, "notify": "other"},
    ], [handler, {"name": "other", "command": {"cmd": f"echo other >> {log}"}}])
    Play([role], Context(LocalConnection())).run()
    assert log.read_text() == "handled\n"


def test_a_host_with_a_failure_gets_no_handlers_even_when_the_failure_was_ignored(tmp_path):
    """Issue 14: never restart the gateway of a host that failed."""
    log = tmp_path / "log"
    role = _role(tmp_path, [
        {"name": "switch", "command": {"cmd": "true"}, "notify": "restart"},
        {"name": "hermes", "command": {"cmd": "exit 3"}, "ignore_errors": True},
    ], [{"name": "restart", "command": {"cmd": f"echo restarted >> {log}"}}])
    reports = Play([role], Context(LocalConnection())).run()
    assert not log.exists()
    assert (reports[-1].task, reports[-1].outcome.status) == ("restart", SKIPPED)
    assert reports[-1].outcome.message == "the host failed (r | hermes)"


def test_failure_stops_the_host_unless_ignored(tmp_path):
    role = _role(tmp_path, [
        {"name": "soft", "command": {"cmd": "exit 3"}, "ignore_errors": True},
        {"name": "hard", "command": {"cmd": "exit 4"}},
        {"name": "never", "command": {"cmd": "true"}},
    ])
    play = Play([role], Context(LocalConnection()))
    reports = play.run()
    assert [(r.task, r.outcome.status, r.ignored) for r in reports] == [
        ("soft", FAILED, True), ("hard", FAILED, False)]


def test_ctrl_c_after_a_committing_task_still_runs_the_rest_of_the_host(tmp_path):
    """Stop requested all along: tasks before the switch are skipped by the stop, but once the
    switch (a `commits` task) changed the host, the Hermes step after it still runs."""
    log = tmp_path / "log"
    role = _role(tmp_path, [
        {"name": "switch", "command": {"cmd": f"echo switch >> {log}"}, "commits": True},
        {"name": "hermes entry", "command": {"cmd": f"echo entry >> {log}"}},
    ])
    play = Play([role], Context(LocalConnection()), should_stop=lambda: len(play.reports) > 0)
    play.run()
    assert log.read_text() == "switch\nentry\n" and not play.stopped

    unchanged = _role(tmp_path, [
        {"name": "switch", "command": {"cmd": "true", "changed_when": False}, "commits": True},
        {"name": "hermes entry", "command": {"cmd": f"echo again >> {log}"}},
    ])
    play = Play([unchanged], Context(LocalConnection()), should_stop=lambda: len(play.reports) > 0)
    play.run()
    assert play.stopped and "again" not in log.read_text()


def test_when_false_skips(tmp_path):
    role = _role(tmp_path, [{"name": "w", "command": {"cmd": "false"}, "when": "platform == 'macos'"}])
    reports = Play([role], Context(LocalConnection(), vars={"platform": "linux"})).run()
    assert reports[0].outcome.status == SKIPPED


# -- operations: read first, change only what differs, check mode changes nothing -----------

def op(kind, tmp_path, check=False, **args):
    ctx = Context(LocalConnection(), check=check, facts={"home": str(tmp_path), "platform": "linux"})
    return REGISTRY[kind](ctx, **args)


def test_directory(tmp_path):
    d = tmp_path / "a" / "b"
    assert op("directory", tmp_path, check=True, path=str(d), mode="0750").status == CHANGED
    assert not d.exists()
    assert op("directory", tmp_path, path=str(d), mode="0750").status == CHANGED
    assert oct(d.stat().st_mode & 0o777) == "0o750"
    assert op("directory", tmp_path, path=str(d), mode="0750").status == OK
    d.chmod(0o755)
    assert op("directory", tmp_path, path=str(d), mode="0750").status == CHANGED


def test_copy_mode_backup_diff_and_check(tmp_path):
    f = tmp_path / "conf"
    out = op("copy", tmp_path, check=True, dest=str(f), content="a\n", mode="0600")
    assert out.status == CHANGED and "+a" in out.diff and not f.exists()
    assert op("copy", tmp_path, dest=str(f), content="a\n", mode="0600").status == CHANGED
    assert f.read_text() == "a\n" and f.stat().st_mode & 0o777 == 0o600
    assert op("copy", tmp_path, dest=str(f), content="a\n", mode="0600").status == OK
    out = op("copy", tmp_path, check=True, dest=str(f), content="b\n", mode="0600", backup=True)
    assert out.status == CHANGED and "-a\n+b" in out.diff and f.read_text() == "a\n"
    assert op("copy", tmp_path, dest=str(f), content="b\n", mode="0600", backup=True).changed
    backups = list(tmp_path.glob("conf.bak-*"))
    assert [b.read_text() for b in backups] == ["a\n"]
    assert f.read_text() == "b\n" and f.stat().st_mode & 0o777 == 0o600


def test_template_operation_reports_undefined(tmp_path):
    (tmp_path / "t.j2").write_text("{{ nope }}")
    out = op("template", tmp_path, src="t.j2", dest=str(tmp_path / "out"), templates_dir=str(tmp_path))
    assert out.status == FAILED and "nope" in out.message


def test_command_creates_and_changed_when(tmp_path):
    marker = tmp_path / "done"
    cmd = f"touch {marker}; echo made"
    assert op("command", tmp_path, check=True, cmd=cmd, creates=str(marker)).status == CHANGED
    assert not marker.exists()
    assert op("command", tmp_path, cmd=cmd, creates=str(marker)).status == CHANGED
    assert op("command", tmp_path, cmd=cmd, creates=str(marker)).status == OK
    assert op("command", tmp_path, cmd="echo same", changed_when="'updated' in stdout").status == OK
    assert op("command", tmp_path, cmd="exit 5").status == FAILED


def test_symlink_switch_is_atomic_and_idempotent(tmp_path):
    (tmp_path / "releases" / "a").mkdir(parents=True)
    (tmp_path / "releases" / "b").mkdir()
    link = str(tmp_path / "current")
    assert op("symlink", tmp_path, check=True, path=link, target="releases/a").status == CHANGED
    assert not os.path.lexists(link)
    assert op("symlink", tmp_path, path=link, target="releases/a").status == CHANGED
    assert op("symlink", tmp_path, path=link, target="releases/a").status == OK
    assert op("symlink", tmp_path, path=link, target="releases/b").status == CHANGED
    assert os.readlink(link) == "releases/b" and not os.path.lexists(link + ".new")


def test_prune_keeps_newest_and_protected(tmp_path):
    releases = tmp_path / "releases"
    for i, name in enumerate(["r1", "r2", "r3", "r4", "r5"]):
        (releases / name).mkdir(parents=True)
        os.utime(releases / name, (time.time() + i, time.time() + i))
    out = op("prune_releases", tmp_path, check=True, path=str(releases), keep=3, protect=["r5", "r1"])
    assert out.status == CHANGED and len(list(releases.iterdir())) == 5
    op("prune_releases", tmp_path, path=str(releases), keep=3, protect=["r5", "r1"])
    assert sorted(p.name for p in releases.iterdir()) == ["r1", "r4", "r5"]
    assert op("prune_releases", tmp_path, path=str(releases), keep=3, protect=["r5", "r1"]).status == OK


def test_module_call_maps_json_status(tmp_path):
    out = op("module", tmp_path, python="/usr/bin/python3", module="json.tool",
             args=[str(_json(tmp_path, {"status": "unchanged"}))])
    assert out.status == OK
    out = op("module", tmp_path, python="/usr/bin/python3", module="json.tool",
             args=[str(_json(tmp_path, {"status": "changed", "mcp_server": "added", "seed": "x",
                                        "skill": "y"}))])
    assert out.status == CHANGED and "mcp_server=added" in out.message
    out = op("module", tmp_path, python="/usr/bin/python3", module="json.tool",
             args=[str(_json(tmp_path, {"ok": False, "error": "boom"}))])
    assert out.status == FAILED and out.message == "boom"
    assert op("module", tmp_path, check=True, python="/usr/bin/python3", module="json.tool").status == SKIPPED


def _json(tmp_path, data):
    import json
    path = tmp_path / "answer.json"
    path.write_text(json.dumps(data))
    return path


def test_facts_in_one_round_trip(tmp_path):
    calls = []

    class Counting(LocalConnection):
        def run(self, command, **kw):
            calls.append(command)
            return super().run(command, **kw)

    facts = gather(Counting(), dict(inv.DEFAULTS, hermes_home=str(tmp_path), runtime_dir=str(tmp_path)))
    assert len(calls) == 1
    assert facts["os"] == "Linux" and facts["platform"] == "linux"
    assert facts["python_version"].startswith("3.") and facts["uid"] == os.getuid()
    assert facts["home_exists"] and not facts["config_exists"] and facts["deployed_sha"] is None


# -- runner ---------------------------------------------------------------------------------

def test_exit_codes():
    r = lambda status: HostResult("h", status)
    assert exit_code([r("ok"), r("changed")]) == 0
    assert exit_code([r("failed"), r("ok")]) == 2
    assert exit_code([r("unreachable")]) == 4
    assert exit_code([r("unreachable"), r("failed")]) == 6
    assert exit_code([r("ok")], interrupted=True) == 130


def test_a_crashing_host_does_not_stop_the_others():
    hosts = [inv.Host(f"h{i}", dict(inv.DEFAULTS)) for i in range(4)]

    def work(host, should_stop):
        if host.name == "h1":
            raise RuntimeError("bug")
        return HostResult(host.name, "changed")

    results, interrupted = run_hosts(hosts, work, forks=2)
    assert [r.status for r in results] == ["changed", "failed", "changed", "changed"]
    assert not interrupted and "h1: failed: RuntimeError: bug" in recap(results)


def test_ctrl_c_stops_new_hosts_and_lets_running_ones_finish_their_task():
    import signal
    import threading
    hosts = [inv.Host(f"h{i}", dict(inv.DEFAULTS)) for i in range(3)]
    steps = []

    def work(host, should_stop):
        for step in range(3):
            if should_stop():
                return HostResult(host.name, "interrupted", message="stopped between tasks")
            time.sleep(0.3)  # a task that is never cut in half
            steps.append((host.name, step))
        return HostResult(host.name, "changed")

    threading.Timer(0.4, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    results, interrupted = run_hosts(hosts, work, forks=1)
    assert interrupted and exit_code(results, interrupted) == 130
    assert [r.status for r in results] == ["interrupted"] * 3
    assert steps == [("h0", 0), ("h0", 1)]  # h0 finished the task it was in; h1, h2 never began
    assert results[1].message == "not started"


def test_the_hermes_home_and_gateway_names_follow_the_active_profile():
    """Facts of hermes-agent 0.19 (hermes_cli/gateway.py): a profile's gateway has its own
    systemd unit and launchd label; any other home a hash of its path."""
    import hashlib

    from fleet.hermes_names import resolve

    default = resolve("/home/u/.hermes", "/home/u", None)
    assert (default.home, default.unit, default.label) == ("/home/u/.hermes", "hermes-gateway.service", "ai.hermes.gateway")
    assert resolve("/home/u/.hermes", "/home/u", "default").unit == "hermes-gateway.service"
    work = resolve("/home/u/.hermes", "/home/u", "Work\n")
    assert (work.home, work.profile, work.unit, work.label) == (
        "/home/u/.hermes/profiles/work", "work", "hermes-gateway-work.service", "ai.hermes.gateway-work")
    assert resolve("/home/u/.hermes/profiles/work", "/home/u", None).unit == "hermes-gateway-work.service"
    other = resolve("/srv/agent", "/home/u", None)
    assert other.unit == f"hermes-gateway-{hashlib.sha256(b'/srv/agent').hexdigest()[:8]}.service"
    assert resolve("/home/u/.hermes", "/home/u", "../etc").home == "/home/u/.hermes"  # not a profile name


def test_a_skipped_task_names_the_condition_that_was_false(tmp_path):
    role = _role(tmp_path, [{"name": "t", "command": {"cmd": "true"},
                             "when": "restart_gateway and (force or runtime != sha) and hermes_config_exists"}])
    reports = Play([role], Context(LocalConnection(), vars={
        "restart_gateway": True, "force": False, "runtime": "a", "sha": "a", "hermes_config_exists": True})).run()
    assert reports[0].outcome.message == "when: (force or runtime != sha) is false"


def test_limit_reads_ansibles_syntax():
    from fleet.inventory import Host, limit_allows

    h03 = Host("h03", groups=["workers", "all"])
    h04 = Host("h04", groups=["workers", "all"])
    hub = Host("hub", groups=["macs", "all"])
    chosen = lambda limit: [h.name for h in (h03, h04, hub) if limit_allows(limit, h)]
    assert chosen("workers:!h03") == ["h04"]
    assert chosen("workers,hub") == ["h03", "h04", "hub"]
    assert chosen("all:&macs") == ["hub"]
    assert chosen("!h0*") == ["hub"]
    assert chosen("h0[34]") == ["h03", "h04"]


def test_every_operator_command_is_reachable_from_the_fleet_group():
    from click.testing import CliRunner

    from fleet.cli import fleet

    for command, shows in ((["soul", "collect"], "--into"), (["backup"], "--keep"), (["restore"], "--from"),
                           (["bootstrap"], "--memory-from"), (["update"], "--restart-gateway")):
        result = CliRunner().invoke(fleet, [*command, "--help"])
        assert result.exit_code == 0 and shows in result.output, (command, result.output)


def test_the_hermes_step_says_what_the_installer_did_plugin_and_provider_included():
    from fleet.operations.module import outcome_from_answer

    answer = {"status": "changed", "mcp_server": "added", "seed": "created", "skill": "installed",
              "plugin": "installed", "memory_provider": "selected", "errors": []}
    assert outcome_from_answer(answer, 0, "").message == (
        "mcp_server=added, seed=created, skill=installed, plugin=installed, memory_provider=selected")
    # A runtime from before the memory provider: its three fields only.
    older = {"status": "unchanged", "mcp_server": "unchanged", "seed": "exists", "skill": "unchanged", "errors": []}
    assert outcome_from_answer(older, 0, "").message == "mcp_server=unchanged, seed=exists, skill=unchanged"
