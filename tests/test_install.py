"""The Hermes installer on homes built by hand: idempotence, exact config edits, bad homes."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tests.seed_fixtures import CONFIG_WITH_SERVERS, snapshot, write_home
from soulgraph.hermes import install as install_module
from soulgraph.hermes.install import install
from soulgraph.hermes.skill import SKILL_RELPATH, skill_text

REPORT_KEYS = {
    "hermes_home", "profile", "check", "status", "config", "mcp_server", "backup", "config_diff",
    "seed", "seed_nodes", "scopes", "seed_skipped", "seed_flagged", "soul_file", "skill", "skill_file", "plugin", "plugin_dir", "memory_provider",
    "memory_provider_before", "warnings", "errors",
}
PROVIDER_LINE = "  provider: soulgraph  # managed by python -m soulgraph.install"


def load(path: Path):
    return YAML(typ="safe").load(path.read_text())


def without_our_entry(text: str) -> str:
    """config.yaml text with the lines of our entry taken out."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("soul:"))
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines) and (len(lines[end]) - len(lines[end].lstrip()) > indent) and lines[end].strip():
        end += 1
    lines = lines[:start] + lines[end:]
    # And the memory provider line, with a `memory:` section it made.
    at = next((i for i, line in enumerate(lines) if line.rstrip("\r\n") == PROVIDER_LINE), None)
    if at is not None:
        del lines[at]
        if lines[at - 1].rstrip("\r\n") == "memory:" and (at == len(lines) or not lines[at].startswith(" ")):
            del lines[at - 1]
    return "".join(lines)


@pytest.fixture
def home(tmp_path):
    home = write_home(tmp_path / "home")
    config = home / "config.yaml"
    config.write_text(CONFIG_WITH_SERVERS)
    config.chmod(0o600)
    return home


def run_main(args, capsys):
    code = install_module.main(args)
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


# --------------------------------------------------------------------- the happy path
def test_first_install_adds_entry_seed_and_skill(home, capsys):
    code, report, _ = run_main(["--hermes-home", str(home), "--python", "/opt/soul/venv/bin/python"], capsys)
    assert code == 0
    assert set(report) == REPORT_KEYS
    assert report | {"backup": None, "config_diff": "", "warnings": []} == {
        "hermes_home": str(home), "profile": None, "check": False, "status": "changed",
        "config": str(home / "config.yaml"), "mcp_server": "added", "backup": None, "config_diff": "",
        "seed": "created", "seed_nodes": 16, "scopes": None, "seed_skipped": ["memories/MEMORY.md.bak.1714000000"], "seed_flagged": [], "soul_file": str(home / "soul.json"),
        "skill": "installed", "skill_file": str(home / SKILL_RELPATH), "warnings": [], "errors": [],
        "plugin": "installed", "plugin_dir": str(home / "plugins" / "soulgraph"),
        "memory_provider": "selected", "memory_provider_before": None,
    }
    entry = load(home / "config.yaml")["mcp_servers"]["soul"]
    assert entry == {
        "command": "/opt/soul/venv/bin/python",
        "args": ["-m", "soulgraph.mcp", "--soul-file", str(home / "soul.json"), "--structured-only"],
        "enabled": True, "timeout": 60, "connect_timeout": 30,
        "tools": {"resources": False, "prompts": False},
    }
    assert (home / SKILL_RELPATH).read_text() == skill_text()
    assert oct((home / "soul.json").stat().st_mode & 0o777) == "0o600"


def test_config_comments_and_other_servers_are_kept_byte_for_byte(home):
    report = install(home, python="/opt/soul/venv/bin/python")
    new_text = (home / "config.yaml").read_text()
    # Take our entry out again and the file is exactly what the user wrote.
    assert without_our_entry(new_text) == CONFIG_WITH_SERVERS
    servers = load(home / "config.yaml")["mcp_servers"]
    assert list(servers) == ["filesystem", "github", "soul"]
    assert servers["github"]["env"] == {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}
    # our entry is indented like its siblings
    assert "\n    soul:  # managed by python -m soulgraph.install\n" in new_text
    # the backup is the file as it was, as private as it was; the new file keeps its mode
    backup = Path(report["backup"])
    assert backup.parent == home and backup.name.startswith("config.yaml.bak-soulgraph-")
    assert backup.read_text() == CONFIG_WITH_SERVERS
    assert oct(backup.stat().st_mode & 0o777) == "0o600"
    assert oct((home / "config.yaml").stat().st_mode & 0o777) == "0o600"


def test_second_run_changes_nothing_at_all(home):
    install(home, python="/opt/soul/venv/bin/python")
    before = snapshot(home)
    report = install(home, python="/opt/soul/venv/bin/python")
    assert (report["status"], report["mcp_server"], report["seed"], report["skill"]) == (
        "unchanged", "unchanged", "exists", "unchanged")
    assert report["backup"] is None and report["config_diff"] == "" and report["seed_nodes"] == 16
    assert snapshot(home) == before  # byte-identical, same modes, not even rewritten


def test_check_changes_nothing_and_shows_the_diff(home, capsys):
    before = snapshot(home)
    code, report, err = run_main(["--hermes-home", str(home), "--check", "--python", "/p/python"], capsys)
    assert code == 0 and snapshot(home) == before
    assert (report["check"], report["status"], report["mcp_server"], report["seed"], report["skill"]) == (
        True, "changed", "added", "created", "installed")
    assert report["backup"] is None
    diff = report["config_diff"]
    assert diff.startswith(f"--- {home / 'config.yaml'}\n+++ {home / 'config.yaml'} (after install)\n")
    assert "+    soul:  # managed by python -m soulgraph.install\n" in diff
    assert "+      command: /p/python\n" in diff
    assert not [line for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert err == diff  # the same diff, for a human, on stderr


def test_check_after_install_reports_unchanged(home):
    install(home, python="/p/python")
    report = install(home, python="/p/python", check=True)
    assert (report["status"], report["config_diff"]) == ("unchanged", "")


def test_a_new_python_updates_only_our_entry(home):
    install(home, python="/old/venv/bin/python")
    old_text = (home / "config.yaml").read_text()
    report = install(home, python="/new/venv/bin/python")
    assert (report["status"], report["mcp_server"], report["seed"], report["skill"]) == (
        "changed", "updated", "exists", "unchanged")
    new_text = (home / "config.yaml").read_text()
    assert new_text == old_text.replace("/old/venv/bin/python", "/new/venv/bin/python")
    assert Path(report["backup"]).read_text() == old_text


def test_the_users_own_keys_in_our_entry_are_kept(home):
    install(home, python="/p/python")
    config = home / "config.yaml"
    text = config.read_text().replace("      timeout: 60\n", "      timeout: 90\n      env: {SOUL_DEBUG: '1'}\n")
    text = text.replace("      enabled: true\n", "      enabled: false\n")
    config.write_text(text)
    report = install(home, python="/p/python")
    assert report["mcp_server"] == "unchanged"
    assert report["warnings"] == [f"{config}: mcp_servers.soul has enabled: false; left as set, so Hermes will not load it"]
    assert config.read_text() == text


def test_crlf_config_and_missing_final_newline(home):
    config = home / "config.yaml"
    config.write_bytes(b"model:\r\n  default: x\r\nmcp_servers:\r\n  other:\r\n    command: x\r\ndisplay: {}")
    install(home, python="/p/python")
    data = config.read_bytes()
    assert data.startswith(b"model:\r\n  default: x\r\nmcp_servers:\r\n  other:\r\n    command: x\r\n  soul:")
    assert data.endswith(b"\r\ndisplay: {}\r\nmemory:\r\n" + PROVIDER_LINE.encode() + b"\r\n")
    assert b"\n" not in data.replace(b"\r\n", b"")


def test_a_symlinked_config_is_edited_where_it_lives(home, tmp_path):
    real = tmp_path / "dotfiles" / "hermes-config.yaml"
    real.parent.mkdir()
    (home / "config.yaml").rename(real)
    (home / "config.yaml").symlink_to(real)
    report = install(home, python="/p/python")
    assert report["mcp_server"] == "added"
    assert (home / "config.yaml").is_symlink()
    assert "soul" in load(real)["mcp_servers"]


# --------------------------------------------------------------------- homes we skip or refuse
def test_home_without_config_is_skipped(tmp_path, capsys):
    home = write_home(tmp_path / "home")
    before = snapshot(home)
    code, report, _ = run_main(["--hermes-home", str(home)], capsys)
    assert code == 0 and snapshot(home) == before
    assert (report["status"], report["mcp_server"], report["seed"], report["skill"]) == (
        "skipped", "skipped", "skipped", "skipped")
    assert report["warnings"] == [f"no Hermes config.yaml in {home}: not a Hermes home in use, skipped"]


@pytest.mark.parametrize("text, message", [
    ("model: [unclosed\n", "is not valid YAML"),
    ("a: 1\na: 2\n", "is not valid YAML (DuplicateKeyError"),
    ("- just\n- a list\n", "holds a YAML list, not a mapping of settings; left untouched"),
    ("plain text\n", "holds a YAML string, not a mapping of settings; left untouched"),
    ("mcp_servers:\n  - name: soul\n    command: x\n",
     "mcp_servers is a list, but Hermes expects a mapping of server name -> settings; left untouched"),
    ("mcp_servers:\n  soul: python -m soulgraph.mcp\n", "mcp_servers.soul is a string, not a mapping; left untouched"),
])
def test_bad_config_is_left_untouched_with_a_clear_error(home, capsys, text, message):
    (home / "config.yaml").write_text(text)
    before = snapshot(home)
    code, report, _ = run_main(["--hermes-home", str(home)], capsys)
    assert code == 1
    assert snapshot(home) == before  # no backup, no soul.json, no skill
    assert (report["status"], report["mcp_server"], report["seed"], report["skill"]) == (
        "error", "error", "skipped", "skipped")
    assert len(report["errors"]) == 1 and message in report["errors"][0]
    assert str(home / "config.yaml") in report["errors"][0]


def test_config_that_is_not_utf8_is_left_untouched(home, capsys):
    (home / "config.yaml").write_bytes(b"model: caf\xe9\n")
    code, report, _ = run_main(["--hermes-home", str(home)], capsys)
    assert code == 1 and report["errors"] == [f"{home / 'config.yaml'} is not UTF-8 text; left untouched"]
    assert (home / "config.yaml").read_bytes() == b"model: caf\xe9\n"


def test_corrupt_soul_file_is_never_touched(home, capsys):
    (home / "soul.json").write_text('{"format": "soulgraph", "nodes": [')
    code, report, _ = run_main(["--hermes-home", str(home), "--python", "/p/python"], capsys)
    assert code == 1
    assert (home / "soul.json").read_text() == '{"format": "soulgraph", "nodes": ['
    assert (report["status"], report["mcp_server"], report["seed"], report["skill"]) == (
        "error", "added", "corrupt, left alone", "installed")
    assert report["errors"][0].startswith(f"{home / 'soul.json'}: not valid JSON")
    assert "refuse to start" in report["errors"][0]


def test_existing_soul_file_is_kept(home):
    from soulgraph.engine.graph import SoulGraph
    from soulgraph.store import SoulFile

    graph = SoulGraph()
    graph.add("a memory the agent already has")
    SoulFile(home / "soul.json").save(graph)
    before = (home / "soul.json").read_bytes()
    report = install(home, python="/p/python")
    assert (report["seed"], report["seed_nodes"]) == ("exists", 1)
    assert (home / "soul.json").read_bytes() == before
    assert report["scopes"] == {"shared": 1, "users": 0, "user_memories": 0}


def test_a_soul_from_before_scopes_is_reported_as_shared_and_left_as_it_is(home):
    """Schema 3 had no scopes: every memory is read as shared, the install says so and what the
    next write will do, and writes nothing; the next write keeps the store's backup."""
    import json

    from soulgraph.store import SoulFile

    old = {"format": "soulgraph", "schema": 3, "seq": 0, "next_id": 3, "saved_at": 1.7e9,
           "nodes": [{"id": "n1", "content": "the deploy runs on Fridays", "tags": [], "created_at": 1.7e9,
                      "last_accessed": 1.7e9, "access_count": 0, "pinned": False, "metadata": {}, "parents": []},
                     {"id": "n2", "content": "Ada prefers tea", "tags": [], "created_at": 1.7e9,
                      "last_accessed": 1.7e9, "access_count": 0, "pinned": False, "metadata": {}, "parents": [],
                      "kind": "preference"}],
           "exploration": None, "audit": []}
    path = home / "soul.json"
    path.write_text(json.dumps(old))
    before = path.read_bytes()
    report = install(home, python="/p/python")
    assert report["scopes"]["shared"] == 2 and report["scopes"]["users"] == 0
    assert "schema 3" in report["scopes"]["migration"] and "soul.json.bak-schema3" in report["scopes"]["migration"]
    assert path.read_bytes() == before and not (home / "soul.json.bak-schema3").exists()
    soul = SoulFile(path)
    with soul.change() as graph:
        assert all(node.scope == "" for node in graph.nodes.values())
        graph.add("a new memory", scope="telegram:1001")
    assert (home / "soul.json.bak-schema3").read_bytes() == before
    assert json.loads(path.read_text())["schema"] == 4


# --------------------------------------------------------------------- the skill
def test_a_hand_written_skill_is_left_alone(home):
    skill = home / SKILL_RELPATH
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: soul-graph\ndescription: my own notes on the soul graph\n---\n\nMine.\n")
    report = install(home, python="/p/python")
    assert report["skill"] == "hand-written, left alone"
    assert report["status"] == "changed"  # the rest went in
    assert skill.read_text().endswith("Mine.\n")


def test_a_same_named_skill_in_another_folder_is_left_alone(home):
    other = home / "skills" / "memory" / "soul-graph" / "SKILL.md"
    other.parent.mkdir(parents=True)
    other.write_text("---\nname: soul-graph\ndescription: mine\n---\n")
    report = install(home, python="/p/python")
    assert report["skill"] == "hand-written, left alone"
    assert not (home / SKILL_RELPATH).exists()


def test_our_skill_is_updated_when_it_changes(home):
    skill = home / SKILL_RELPATH
    skill.parent.mkdir(parents=True)
    skill.write_text(skill_text().replace("## Rules", "## Old rules"))
    report = install(home, python="/p/python")
    assert report["skill"] == "updated"
    assert skill.read_text() == skill_text()


def test_skill_frontmatter_is_what_hermes_reads():
    text = skill_text()
    assert text.startswith("---\n")
    meta = YAML(typ="safe").load(text.split("---\n")[1])
    assert meta["name"] == "soul-graph" and len(meta["name"]) <= 64
    assert 0 < len(meta["description"]) <= 1024
    assert meta["metadata"]["hermes"]["requires_toolsets"] == ["mcp-soul"]
    assert "memory" in meta["metadata"]["hermes"]["tags"]
    assert meta["metadata"]["soulgraph"]["generated_by"] == "soulgraph.install"
    for tool in ("soul_prime", "soul_related", "soul_add", "soul_link", "soul_pin", "soul_explore", "soul_promote"):
        assert tool in text


# --------------------------------------------------------------------- profiles
def make_profiles(root: Path, active: str | None) -> Path:
    root.mkdir()
    (root / "config.yaml").write_text("display: {compact: true}\n")
    profile = write_home(root / "profiles" / "work")
    (profile / "config.yaml").write_text("model:\n  default: x\n")
    if active is not None:
        (root / "active_profile").write_text(active)
    return profile


def test_active_profile_redirects_and_says_so(tmp_path):
    root = tmp_path / "root"
    profile = make_profiles(root, "work\n")
    report = install(root, python="/p/python")
    assert (report["hermes_home"], report["profile"], report["status"]) == (str(profile), "work", "changed")
    assert report["warnings"][0] == f"{root}/active_profile selects profile 'work': installing into {profile}"
    assert soul_file_arg(load(profile / "config.yaml")) == str(profile / "soul.json")
    assert (profile / "soul.json").exists() and (profile / SKILL_RELPATH).exists()
    assert (root / "config.yaml").read_text() == "display: {compact: true}\n"
    assert not (root / "soul.json").exists()


def test_default_active_profile_and_profile_homes_are_used_as_they_are(tmp_path):
    root = tmp_path / "root"
    profile = make_profiles(root, "default\n")
    assert install(root, python="/p/python", check=True)["hermes_home"] == str(root)
    direct = install(profile, python="/p/python", check=True)
    assert (direct["hermes_home"], direct["profile"]) == (str(profile), "work")


def test_an_active_profile_that_does_not_exist_is_an_error(tmp_path, capsys):
    root = tmp_path / "root"
    make_profiles(root, "gone\n")
    before = snapshot(root)
    code, report, _ = run_main(["--hermes-home", str(root)], capsys)
    assert code == 1 and snapshot(root) == before
    assert report["status"] == "error"
    assert report["errors"] == [f"{root / 'active_profile'} selects profile 'gone', but {root / 'profiles' / 'gone'} does not exist"]


def test_hermes_home_comes_from_the_environment(home, monkeypatch):
    monkeypatch.setenv("HERMES_HOME", str(home))
    report = install(check=True)
    assert report["hermes_home"] == str(home)
    assert load_entry_python(report) == os.path.abspath(sys.executable)


def soul_file_arg(config) -> str:
    args = config["mcp_servers"]["soul"]["args"]
    return args[args.index("--soul-file") + 1]


def load_entry_python(report) -> str:
    diff = report["config_diff"]
    return next(line.split("command: ", 1)[1] for line in diff.splitlines() if "command: " in line)


def test_toolsets_are_written_into_the_entry_only_when_not_the_default(home, capsys):
    """--toolsets graph,memory adds the flag to the server's args (then back to the default
    removes it); a bad toolset is a usage error naming the choices, nothing written."""
    before = (home / "config.yaml").read_bytes()
    with pytest.raises(SystemExit):
        install_module.main(["--hermes-home", str(home), "--toolsets", "graph,bogus"])
    assert "unknown toolset bogus (toolsets: graph, memory, markdown)" in capsys.readouterr().err
    assert (home / "config.yaml").read_bytes() == before
    code, report, _ = run_main(["--hermes-home", str(home), "--python", "/p", "--toolsets", "graph,memory"], capsys)
    assert code == 0 and report["mcp_server"] == "added"
    args = load(home / "config.yaml")["mcp_servers"]["soul"]["args"]
    assert args == ["-m", "soulgraph.mcp", "--soul-file", str(home / "soul.json"), "--toolsets", "graph,memory",
                    "--structured-only"]
    code, report, _ = run_main(["--hermes-home", str(home), "--python", "/p"], capsys)
    assert report["mcp_server"] == "updated"
    assert load(home / "config.yaml")["mcp_servers"]["soul"]["args"] == \
        ["-m", "soulgraph.mcp", "--soul-file", str(home / "soul.json"), "--structured-only"]


def test_verify_expects_the_tools_of_the_inventorys_toolsets():
    from fleet.verify.host_checks import expected_tools
    from fleet.verify.target import HostLayout

    assert expected_tools("graph") == 13 and expected_tools("graph,memory") == 17
    layout = HostLayout("/r", "/h", toolsets="graph,memory")
    assert layout.toolset_args == ["--toolsets", "graph,memory"] and HostLayout("/r", "/h").toolset_args == []


def test_an_inventory_with_an_unknown_toolset_is_refused_before_any_host_is_touched(tmp_path):
    from fleet.inventory import InventoryError, load

    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  vars:\n    soul_toolsets: graph,bogus\n  hosts:\n    w1:\n      address: 127.0.0.9\n")
    with pytest.raises(InventoryError, match="soul_toolsets 'graph,bogus' must be graph"):
        load(inventory)
    inventory.write_text("all:\n  vars:\n    soul_toolsets: graph,memory\n  hosts:\n    w1:\n      address: 127.0.0.9\n")
    assert load(inventory).hosts["w1"].vars["soul_toolsets"] == "graph,memory"


def test_only_the_newest_config_backups_are_kept(home, capsys):
    """Issue 14: one backup per changing install used to pile up for ever."""
    import os as _os
    from soulgraph.hermes.install import KEEP_BACKUPS
    for i in range(KEEP_BACKUPS + 3):
        old = home / f"config.yaml.bak-soulgraph-2026010{i}T000000Z"
        old.write_text("old\n")
        _os.utime(old, (1_700_000_000 + i, 1_700_000_000 + i))
    mine = home / "config.yaml.bak-something-else"
    mine.write_text("the user's\n")
    code, report, _ = run_main(["--hermes-home", str(home), "--python", "/p"], capsys)
    assert code == 0 and report["backup"]
    left = sorted(p.name for p in home.glob("config.yaml.bak-soulgraph-*"))
    assert len(left) == KEEP_BACKUPS and Path(report["backup"]).name in left
    assert "config.yaml.bak-soulgraph-20260100T000000Z" not in left and mine.exists()


def test_the_mcp_scope_is_set_by_the_operator_and_kept_by_every_later_install(home, capsys):
    """A personal bot's owner serves their own memories to the MCP tools once; a fleet-update
    re-running the installer must not drop it, nor a bad scope be written."""
    code, report, _ = run_main(["--hermes-home", str(home), "--python", "/p/python", "--mcp-scope", "telegram:1001"],
                               capsys)
    assert code == 0
    args = load(home / "config.yaml")["mcp_servers"]["soul"]["args"]
    assert args[args.index("--scope") + 1] == "telegram:1001" and args[-1] == "--structured-only"
    code, report, _ = run_main(["--hermes-home", str(home), "--python", "/p/python"], capsys)
    assert (code, report["mcp_server"]) == (0, "unchanged")
    code, report, _ = run_main(["--hermes-home", str(home), "--python", "/p/python", "--mcp-scope", "shared"], capsys)
    assert report["mcp_server"] == "updated" and "--scope" not in load(home / "config.yaml")["mcp_servers"]["soul"]["args"]
    with pytest.raises(SystemExit):
        run_main(["--hermes-home", str(home), "--mcp-scope", "alice"], capsys)
    assert "is not 'platform:user'" in capsys.readouterr().err
