"""Installing the memory provider plugin into a real Hermes home, selecting it without taking
over another provider, and `--remove` putting config.yaml back byte for byte."""

import json

from soulgraph.hermes import install as install_module
from soulgraph.hermes.install import install
from soulgraph.hermes.uninstall import uninstall
from tests import hermes_client

PYTHON = "/opt/soul/venv/bin/python"


def memory_status(home) -> str:
    proc = hermes_client.run_hermes(home, "memory", "status", timeout=120)
    return hermes_client._output(proc)


def test_install_selects_the_provider_hermes_lists_it_and_remove_restores_every_byte(hermes_home):
    config = hermes_home / "config.yaml"
    original = config.read_bytes()
    had_plugins_dir = (hermes_home / "plugins").exists()
    report = install(hermes_home)
    assert (report["plugin"], report["memory_provider"], report["memory_provider_before"]) == ("installed", "selected", None)
    settings = json.loads((hermes_home / "plugins" / "soulgraph" / "settings.json").read_text())
    assert settings["soul_file"] == str(hermes_home / "soul.json") and settings["generated_by"] == "soulgraph.install"
    status = memory_status(hermes_home)
    assert "Provider:  soulgraph" in status and "available ✓" in status, status
    assert install(hermes_home)["status"] == "unchanged"  # idempotent

    removed = uninstall(hermes_home)
    assert (removed["config"], removed["plugin"], removed["skill"], removed["soul_file"]) == (
        "restored", "removed", "removed", "kept")
    assert config.read_bytes() == original
    assert (hermes_home / "plugins").exists() == had_plugins_dir
    assert not (hermes_home / ".soulgraph").exists() and (hermes_home / "soul.json").exists()
    assert "Provider:  soulgraph" not in memory_status(hermes_home)


def test_another_provider_is_left_alone_unless_asked_and_comes_back_on_remove(hermes_home):
    config = hermes_home / "config.yaml"
    config.write_text(config.read_text() + "\nmemory:\n  provider: holographic\n")
    original = config.read_bytes()
    report = install(hermes_home, python=PYTHON)
    assert (report["plugin"], report["memory_provider"], report["memory_provider_before"]) == (
        "not installed: another provider is chosen", "taken", "holographic")
    assert any("memory.provider is 'holographic'" in w for w in report["warnings"])
    assert "provider: holographic" in config.read_text() and not (hermes_home / "plugins" / "soulgraph").exists()
    taken = install(hermes_home, python=PYTHON, memory_provider="soulgraph")
    assert (taken["memory_provider"], taken["memory_provider_before"]) == ("replaced", "holographic")
    assert "provider: soulgraph" in config.read_text()
    assert uninstall(hermes_home)["config"] == "restored"
    assert config.read_bytes() == original


def test_remove_after_the_user_edited_config_takes_out_only_our_lines(hermes_home):
    config = hermes_home / "config.yaml"
    install(hermes_home, python=PYTHON)
    config.write_text(config.read_text() + "\n# my own note\ntimezone: Europe/Berlin\n")
    removed = uninstall(hermes_home)
    text = config.read_text()
    assert removed["config"] == "edited" and any("changed after the install" in w for w in removed["warnings"])
    assert "soulgraph" not in text and "timezone: Europe/Berlin" in text and "# my own note" in text
    assert removed["backup"] and "soulgraph" in open(removed["backup"]).read()


def test_someone_elses_plugin_of_our_name_is_left_alone(hermes_home):
    foreign = hermes_home / "plugins" / "soulgraph"
    foreign.mkdir(parents=True)
    (foreign / "__init__.py").write_text("# not ours\n")
    report = install(hermes_home, python=PYTHON)
    assert report["plugin"] == "someone else's, left alone" and report["memory_provider"] == "skipped"
    assert (foreign / "__init__.py").read_text() == "# not ours\n"
    assert uninstall(hermes_home)["plugin"] == "someone else's, left alone"
    assert (foreign / "__init__.py").exists()


def test_none_leaves_plugins_and_the_provider_alone_and_check_changes_nothing(hermes_home, capsys):
    report = install(hermes_home, python=PYTHON, memory_provider="none")
    assert (report["plugin"], report["memory_provider"]) == ("skipped", "skipped")
    assert not (hermes_home / "plugins" / "soulgraph").exists() and "memory:\n  provider" not in (hermes_home / "config.yaml").read_text()
    before = {p: p.read_bytes() for p in hermes_home.rglob("*") if p.is_file()}
    code = install_module.main(["--hermes-home", str(hermes_home), "--remove", "--check"])
    answer = json.loads(capsys.readouterr().out)
    assert code == 0 and answer["check"] and answer["config"] == "restored"
    assert {p: p.read_bytes() for p in hermes_home.rglob("*") if p.is_file()} == before


def test_a_memory_section_we_cannot_edit_costs_the_provider_not_the_mcp_entry(hermes_home):
    config = hermes_home / "config.yaml"
    config.write_text(config.read_text() + "\nmemory: [not, a, mapping]\n")
    report = install(hermes_home, python=PYTHON)
    assert report["status"] == "error" and report["memory_provider"] == "error" and report["mcp_server"] == "added"
    assert any("memory is a list" in e for e in report["errors"])
    assert "soulgraph.mcp" in config.read_text() and "memory: [not, a, mapping]" in config.read_text()
    assert not (hermes_home / "plugins" / "soulgraph").exists()
