"""Post-deploy host checks, one per resource, in testinfra's style.

Collected by run_verify() (fleet/verify/run.py), whose plugin parametrizes `target` with the hosts
and provides `verify_sessions` (each host's reads, sessions.py) and `verify_settings` (hermes, sha). Each assertion's
message is what the summary shows, so it says what was found and what was expected.
"""

from __future__ import annotations

import json
import posixpath

import pytest
import yaml

from fleet.verify.probes import HostFacts, Probe
from soulgraph.server.toolsets import TOOLSETS, tool_names

EXPECTED_TOOLS = 13  # the default toolset, graph
SELF_CHECK_TIMEOUT = 180  # seconds; the MCP server starts in about one on an idle host
FOLLOWUP_TIMEOUT = 600  # seconds a check waits on its host's reads (each command has its own deadline)


def expected_tools(toolsets: str) -> int:
    """How many tools the server serves for the inventory's soul_toolsets."""
    return len(tool_names(tuple(dict.fromkeys(name for name in toolsets.split(",") if name in TOOLSETS))))


@pytest.fixture(scope="module")
def session(target, verify_sessions):
    return verify_sessions[target.name]


@pytest.fixture(scope="module")
def layout(session):
    # Raises the host's connection error (unreachable, key refused) in every one of its checks.
    return session.connected.result()


@pytest.fixture(scope="module")
def facts(session, layout) -> HostFacts:
    return session.facts.result()


def probe(session, name: str, timeout: float = FOLLOWUP_TIMEOUT) -> Probe | None:
    return session.probe(name, timeout)


def test_runtime_imports(facts, layout):
    imports = facts["imports"]
    assert imports.ok, f"{layout.current_python} cannot import soulgraph: {imports.last_line}"


def test_vectors(facts, layout):
    """With soul_embed, the runtime can embed: numpy and the model's package are installed."""
    if not layout.embed:
        pytest.skip("soul_embed is false: search is lexical")
    vectors = facts["vectors"]
    assert vectors.out.strip() == "True", \
        f"{layout.current_python} cannot embed (soul_embed is true): {vectors.last_line}"


def test_current_release(facts, layout, verify_settings):
    deployed = facts.deployed_release
    assert deployed is not None, f"{layout.current} is not a symlink"
    sha = verify_settings.sha
    if sha is not None:
        assert deployed == layout.release(sha), f"current points at {deployed}, expected {layout.release(sha)}"
    else:
        assert posixpath.dirname(deployed) == layout.releases, \
            f"current points at {deployed}, outside {layout.releases}"
    assert facts["current_is_dir"].ok, f"current points at missing {deployed}"


def _config(facts, layout) -> dict:
    """The host's config.yaml as a mapping; the check fails in one sentence when it is not."""
    config = facts["config"]
    if not config.ok:
        pytest.fail(f"no {layout.config}")
    try:
        data = yaml.safe_load(config.out) or {}
    except yaml.YAMLError as exc:
        pytest.fail(f"{layout.config} is not valid YAML: {str(exc).splitlines()[0]}")
    if not isinstance(data, dict):
        pytest.fail(f"{layout.config} is not a mapping")
    return data


def test_mcp_entry(facts, layout):
    servers = _config(facts, layout).get("mcp_servers")
    entry = servers.get("soul") if isinstance(servers, dict) else None
    assert isinstance(entry, dict), f"no mcp_servers.soul entry in {layout.config}"
    deployed = facts.deployed_release
    assert deployed is not None, f"{layout.current} is not a symlink: no deployed runtime"
    expected = posixpath.join(deployed, "venv", "bin", "python")
    assert entry.get("command") == expected, \
        f"command is {entry.get('command')}, the deployed runtime's python is {expected}"
    args = ["-m", "soulgraph.mcp", "--soul-file", layout.soul_file, *layout.toolset_args]
    # --structured-only is written by runtimes since issue 13; a host on an older one lacks it.
    found = [a for a in entry.get("args") or [] if a != "--structured-only"]
    assert found == args, f"args are {entry.get('args')}, expected {args} (and --structured-only)"
    tools = entry.get("tools") or {}
    assert tools.get("resources") is False and tools.get("prompts") is False, \
        f"tools is {tools}, expected resources: false and prompts: false"


def test_memory_provider(facts, layout):
    """The plugin Hermes loads, pointing at the deployed runtime, and selected as the inventory
    asks (auto: unless the host's config.yaml names another provider, which is left alone)."""
    if layout.memory_provider == "none":
        pytest.skip("soul_memory_provider is none")
    memory = _config(facts, layout).get("memory")
    chosen = memory.get("provider") if isinstance(memory, dict) else None
    if layout.memory_provider == "auto" and chosen not in (None, "", "soulgraph"):
        return  # the user's provider: the installer left it, and ours out
    assert chosen == "soulgraph", f"memory.provider is {chosen!r}, expected soulgraph"
    settings_file = facts["plugin_settings"]
    assert facts["plugin_init"].ok and settings_file.ok, f"no memory provider plugin in {layout.plugin}"
    try:
        settings = json.loads(settings_file.out)
    except ValueError:
        pytest.fail(f"{layout.plugin}/settings.json is not JSON")
    settings = settings if isinstance(settings, dict) else {}
    expected = posixpath.join(facts.deployed_release or layout.current, "venv", "bin", "python")
    assert settings.get("python") == expected and settings.get("soul_file") == layout.soul_file, \
        f"the plugin runs {settings.get('python')} on {settings.get('soul_file')}, expected {expected} on {layout.soul_file}"


def test_soul_file_private(facts, layout):
    mode = facts["soul_mode"]
    assert mode.ok, f"no {layout.soul_file}"
    found = mode.out.strip()
    assert found == "600", f"{layout.soul_file} has mode {found.zfill(4)}, expected 0600"


def test_skill_present(facts, layout):
    assert facts["skill"].ok, f"no {layout.skill}"


def test_mcp_tools(session, layout):
    result = probe(session, "self_check", SELF_CHECK_TIMEOUT)
    try:
        report = json.loads(result.out)
    except ValueError:
        pytest.fail(f"soulgraph.check with {layout.current_python} exited {result.rc}: {result.last_line}")
    count = report.get("tool_count")
    expected = expected_tools(layout.toolsets)
    assert report.get("ok") and count == expected, \
        f"the MCP server listed {count} tools, expected {expected}" + \
        (f": {report['error']}" if report.get("error") else "")


def test_layered_soul(session, facts, layout, verify_settings):
    """With --soul: the host imported that commit of that repository. Always, where a soul was
    imported: the skills it wrote are still there."""
    state = facts.soul_state
    expected = verify_settings.soul
    if state is None:
        assert expected is None, f"no layered soul imported (no {layout.soul_state}), expected {expected[:12]}"
        pytest.skip("no layered soul imported")
    if not state:
        pytest.fail(f"{layout.soul_state} is not a JSON object")
    if expected is not None:
        assert state.get("commit") == expected, \
            f"the imported soul is {str(state.get('commit'))[:12]}, expected {expected[:12]}"
        origin = verify_settings.soul_origin
        assert origin is None or state.get("origin") == origin, \
            f"the imported soul came from {state.get('origin')}, expected {origin}"
    found = probe(session, "skill_files")
    missing = [posixpath.relpath(path, layout.hermes_home) for path in (found.out.split() if found else [])]
    assert not missing, f"imported skill files are gone: {', '.join(missing[:5])}"


@pytest.mark.hermes
def test_gateway_active(session, facts, layout, target):
    """The gateway of the home the agent runs from (a profile's has its own unit/label), checked
    with the inventory's gateway_status_command when the host restarts it its own way."""
    state = probe(session, "gateway")
    if state is None:
        pytest.skip("gateway_restart_command is set without gateway_status_command: the state cannot be read")
    if facts.system == "Darwin" and not (target.gateway or {}).get("gateway_status_command"):
        uid = facts["uid"].out.strip()
        assert state.ok, f"launchd knows no {layout.gateway_label} in gui/{uid} or user/{uid}"
        assert "state = running" in state.out, f"{layout.gateway_label} is loaded but not running"
        return
    found = state.out.strip() or (state.last_line if state.err.strip() else "")
    assert state.ok, f"the gateway ({layout.gateway_unit}) is not running: {found or 'exit ' + str(state.rc)}"


@pytest.mark.hermes
def test_lingering(session, facts, target):
    """Linux: the gateway's user lingers (its user manager runs without a login), else the
    gateway stops at logout and does not start at boot."""
    if (target.gateway or {}).get("gateway_restart_command"):
        pytest.skip("the host restarts its gateway its own way")
    if facts.system == "Darwin":
        pytest.skip("launchd agents need no lingering")
    shown = probe(session, "lingering")
    user = facts["user"].out.strip()
    if not shown.ok or "Linger=" not in shown.out:
        pytest.skip(f"loginctl cannot tell: {shown.last_line}")
    assert "Linger=yes" in shown.out, \
        f"lingering is off for {user}: the gateway stops at logout and does not start at boot (as root: loginctl enable-linger {user})"


@pytest.mark.hermes
def test_hermes_client_sees_soul(session, layout):
    """Hermes' own client on the host (`hermes mcp test soul`, as seed 000 does), when there."""
    shown = probe(session, "hermes_mcp_test")
    if shown is None:
        pytest.skip("no hermes command on the host's PATH")
    text = shown.out + shown.err
    tools = next((line.split(":", 1)[1].strip() for line in text.splitlines() if "Tools discovered:" in line), None)
    assert shown.ok and "Connected" in text, \
        f"hermes mcp test soul did not connect: {Probe(shown.rc, text).last_line}"
    expected = expected_tools(layout.toolsets)
    assert tools == str(expected), f"hermes mcp test soul found {tools or 'no'} tools, expected {expected}"


@pytest.mark.hermes
def test_hermes_memory_provider(session, layout):
    """Hermes' own view (`hermes memory status`): the provider the inventory asks for is the
    active one and loads."""
    if layout.memory_provider == "none":
        pytest.skip("soul_memory_provider is none")
    shown = probe(session, "hermes_memory_status")
    assert shown is not None, "no hermes command on the host's PATH: hermes memory status cannot run"
    assert shown.ok, f"hermes memory status failed: {shown.last_line}"
    lines = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip()
             for line in shown.out.splitlines() if ":" in line}
    active = lines.get("Provider", "")
    if active.startswith("(none"):  # Hermes prints "(none — built-in only)"
        active = ""
    if layout.memory_provider == "auto" and active not in ("", "soulgraph"):
        return  # auto leaves a provider the user chose (the installer said so)
    assert active == "soulgraph", f"hermes memory status shows provider {active or 'none'!r}, expected soulgraph"
    assert "available" in lines.get("Status", ""), \
        f"hermes memory status: soulgraph is {lines.get('Status') or 'not available'}"
