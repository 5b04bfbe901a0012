"""Post-deploy host checks, one per resource, in testinfra's style.

Collected by run_verify() (fleet/verify/run.py), whose plugin parametrizes `target` with the hosts
and provides `verify_sessions` (connections) and `verify_settings` (hermes, sha). Each assertion's
message is what the summary shows, so it says what was found and what was expected.
"""

from __future__ import annotations

import json
import posixpath

import pytest
import yaml

from soulgraph.server.toolsets import TOOLSETS, tool_names

EXPECTED_TOOLS = 13  # the default toolset, graph


def expected_tools(toolsets: str) -> int:
    """How many tools the server serves for the inventory's soul_toolsets."""
    return len(tool_names(tuple(dict.fromkeys(name for name in toolsets.split(",") if name in TOOLSETS))))
SELF_CHECK_TIMEOUT = 180  # seconds; the MCP server starts in about one on an idle host


@pytest.fixture(scope="module")
def session(target, verify_sessions):
    return verify_sessions[target.name]


@pytest.fixture(scope="module")
def layout(session):
    # Raises the host's connection error (unreachable, key refused) in every one of its checks.
    return session.connected.result()


@pytest.fixture(scope="module")
def host(session, layout):
    return session.host


@pytest.fixture(scope="module")
def deployed_release(host, layout):
    """Where `current` points, as an absolute path; None when it is not a symlink."""
    link = host.run("readlink %s", layout.current)
    if link.rc != 0:
        return None
    return posixpath.normpath(posixpath.join(layout.runtime_dir, link.stdout.strip()))


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def test_runtime_imports(host, layout):
    python = layout.current_python
    result = host.run("%s -c 'import soulgraph'", python)
    assert result.rc == 0, f"{python} cannot import soulgraph: {_last_line(result.stderr)}"


def test_current_release(host, layout, deployed_release, verify_settings):
    assert deployed_release is not None, f"{layout.current} is not a symlink"
    sha = verify_settings.sha
    if sha is not None:
        assert deployed_release == layout.release(sha), \
            f"current points at {deployed_release}, expected {layout.release(sha)}"
    else:
        assert posixpath.dirname(deployed_release) == layout.releases, \
            f"current points at {deployed_release}, outside {layout.releases}"
    assert host.file(deployed_release).is_directory, f"current points at missing {deployed_release}"


def test_mcp_entry(host, layout, deployed_release):
    config = host.file(layout.config)
    assert config.is_file, f"no {layout.config}"
    try:
        data = yaml.safe_load(config.content_string) or {}
    except yaml.YAMLError as exc:
        pytest.fail(f"{layout.config} is not valid YAML: {str(exc).splitlines()[0]}")
    servers = data.get("mcp_servers") if isinstance(data, dict) else None
    entry = servers.get("soul") if isinstance(servers, dict) else None
    assert isinstance(entry, dict), f"no mcp_servers.soul entry in {layout.config}"
    assert deployed_release is not None, f"{layout.current} is not a symlink: no deployed runtime"
    expected = posixpath.join(deployed_release, "venv", "bin", "python")
    assert entry.get("command") == expected, \
        f"command is {entry.get('command')}, the deployed runtime's python is {expected}"
    args = ["-m", "soulgraph.mcp", "--soul-file", layout.soul_file, *layout.toolset_args]
    # --structured-only is written by runtimes since issue 13; a host on an older one lacks it.
    found = [a for a in entry.get("args") or [] if a != "--structured-only"]
    assert found == args, f"args are {entry.get('args')}, expected {args} (and --structured-only)"
    tools = entry.get("tools") or {}
    assert tools.get("resources") is False and tools.get("prompts") is False, \
        f"tools is {tools}, expected resources: false and prompts: false"


def test_memory_provider(host, layout, deployed_release):
    """The plugin Hermes loads, pointing at the deployed runtime, and selected as the inventory
    asks (auto: unless the host's config.yaml names another provider, which is left alone)."""
    if layout.memory_provider == "none":
        pytest.skip("soul_memory_provider is none")
    data = yaml.safe_load(host.file(layout.config).content_string) or {}
    memory = data.get("memory") if isinstance(data, dict) else None
    chosen = memory.get("provider") if isinstance(memory, dict) else None
    if layout.memory_provider == "auto" and chosen not in (None, "", "soulgraph"):
        return  # the user's provider: the installer left it, and ours out
    assert chosen == "soulgraph", f"memory.provider is {chosen!r}, expected soulgraph"
    settings_file = host.file(posixpath.join(layout.plugin, "settings.json"))
    assert host.file(posixpath.join(layout.plugin, "__init__.py")).is_file and settings_file.is_file, \
        f"no memory provider plugin in {layout.plugin}"
    settings = json.loads(settings_file.content_string)
    expected = posixpath.join(deployed_release or layout.current, "venv", "bin", "python")
    assert settings.get("python") == expected and settings.get("soul_file") == layout.soul_file, \
        f"the plugin runs {settings.get('python')} on {settings.get('soul_file')}, expected {expected} on {layout.soul_file}"


def test_soul_file_private(host, layout):
    soul = host.file(layout.soul_file)
    assert soul.is_file, f"no {layout.soul_file}"
    assert soul.mode == 0o600, f"{layout.soul_file} has mode {soul.mode:04o}, expected 0600"


def test_skill_present(host, layout):
    assert host.file(layout.skill).is_file, f"no {layout.skill}"


def test_mcp_tools(session, layout):
    result = session.self_check.result(timeout=SELF_CHECK_TIMEOUT)
    try:
        report = json.loads(result.stdout)
    except ValueError:
        pytest.fail(f"soulgraph.check with {layout.current_python} exited {result.rc}: "
                    f"{_last_line(result.stderr or result.stdout)}")
    count = report.get("tool_count")
    expected = expected_tools(layout.toolsets)
    assert report.get("ok") and count == expected, \
        f"the MCP server listed {count} tools, expected {expected}" + \
        (f": {report['error']}" if report.get("error") else "")


def test_layered_soul(host, layout, verify_settings):
    """With --soul: the host imported that commit of that repository. Always, where a soul was
    imported: the skills it wrote are still there."""
    state_file = host.file(layout.soul_state)
    expected = verify_settings.soul
    if not state_file.exists:
        assert expected is None, f"no layered soul imported (no {layout.soul_state}), expected {expected[:12]}"
        pytest.skip("no layered soul imported")
    try:
        state = json.loads(state_file.content_string)
    except ValueError:
        pytest.fail(f"{layout.soul_state} is not JSON")
    if expected is not None:
        assert state.get("commit") == expected, \
            f"the imported soul is {str(state.get('commit'))[:12]}, expected {expected[:12]}"
        origin = verify_settings.soul_origin
        assert origin is None or state.get("origin") == origin, \
            f"the imported soul came from {state.get('origin')}, expected {origin}"
    skills = state.get("skills") if isinstance(state.get("skills"), dict) else {}
    missing = [posixpath.join(skill, name) for skill, files in skills.items() for name in files
               if not host.file(posixpath.join(layout.hermes_home, skill, name)).is_file]
    assert not missing, f"imported skill files are gone: {', '.join(missing[:5])}"


@pytest.mark.hermes
def test_gateway_active(host, layout, target):
    """The gateway of the home the agent runs from (a profile's has its own unit/label), checked
    with the inventory's gateway_status_command when the host restarts it its own way."""
    from fleet.operations.service import status_command

    system = host.run("uname -s").stdout.strip()
    gateway = target.gateway or {}
    if system == "Darwin" and not gateway.get("gateway_status_command"):
        uid = host.run("id -u").stdout.strip()
        for domain in (f"gui/{uid}", f"user/{uid}"):  # no GUI session over SSH: user/ is next
            shown = host.run("launchctl print %s", f"{domain}/{layout.gateway_label}")
            if shown.rc == 0:
                break
        assert shown.rc == 0, f"launchd knows no {layout.gateway_label} in gui/{uid} or user/{uid}"
        assert "state = running" in shown.stdout, f"{layout.gateway_label} is loaded but not running"
        return
    command = status_command(gateway, "linux", "", layout.gateway_unit, layout.gateway_label)
    if command is None:
        pytest.skip("gateway_restart_command is set without gateway_status_command: the state cannot be read")
    state = host.run(command)
    found = state.stdout.strip() or _last_line(state.stderr)
    assert state.rc == 0, f"the gateway ({layout.gateway_unit}) is not running: {found or 'exit ' + str(state.rc)}"


@pytest.mark.hermes
def test_lingering(host, target):
    """Linux: the gateway's user lingers (its user manager runs without a login), else the
    gateway stops at logout and does not start at boot."""
    if (target.gateway or {}).get("gateway_restart_command"):
        pytest.skip("the host restarts its gateway its own way")
    if host.run("uname -s").stdout.strip() == "Darwin":
        pytest.skip("launchd agents need no lingering")
    user = host.run("id -un").stdout.strip()
    shown = host.run("loginctl show-user %s -p Linger", user)
    if shown.rc != 0 or "Linger=" not in shown.stdout:
        pytest.skip(f"loginctl cannot tell: {_last_line(shown.stderr or shown.stdout)}")
    assert "Linger=yes" in shown.stdout, \
        f"lingering is off for {user}: the gateway stops at logout and does not start at boot (as root: loginctl enable-linger {user})"


@pytest.mark.hermes
def test_hermes_client_sees_soul(host, layout):
    """Hermes' own client on the host (`hermes mcp test soul`, as seed 000 does), when there."""
    if host.run("command -v hermes").rc != 0:
        pytest.skip("no hermes command on the host's PATH")
    shown = host.run("env HERMES_HOME=%s hermes mcp test soul", layout.hermes_home)
    text = shown.stdout + shown.stderr
    tools = next((line.split(":", 1)[1].strip() for line in text.splitlines() if "Tools discovered:" in line), None)
    assert shown.rc == 0 and "Connected" in text, \
        f"hermes mcp test soul did not connect: {_last_line(text)}"
    expected = expected_tools(layout.toolsets)
    assert tools == str(expected), f"hermes mcp test soul found {tools or 'no'} tools, expected {expected}"


@pytest.mark.hermes
def test_hermes_memory_provider(host, layout):
    """Hermes' own view (`hermes memory status`): the provider the inventory asks for is the
    active one and loads."""
    if layout.memory_provider == "none":
        pytest.skip("soul_memory_provider is none")
    shown = host.run("env HERMES_HOME=%s hermes memory status", layout.hermes_home)
    assert shown.rc == 0, f"hermes memory status failed: {_last_line(shown.stderr or shown.stdout)}"
    lines = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip()
             for line in shown.stdout.splitlines() if ":" in line}
    active = lines.get("Provider", "")
    if active.startswith("(none"):  # Hermes prints "(none — built-in only)"
        active = ""
    if layout.memory_provider == "auto" and active not in ("", "soulgraph"):
        return  # auto leaves a provider the user chose (the installer said so)
    assert active == "soulgraph", f"hermes memory status shows provider {active or 'none'!r}, expected soulgraph"
    assert "available" in lines.get("Status", ""), \
        f"hermes memory status: soulgraph is {lines.get('Status') or 'not available'}"
