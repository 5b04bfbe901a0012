"""`fleet verify` after a real `fleet-update` on the lab: every host passes, by the CLI."""

from __future__ import annotations


import pytest

from fleet.build import resolve_sha
from tests.fleet_helpers import reset_to_bare_hermes, run_fleet, run_update
from tests.lab import FakeCommand

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def deployed(_ssh_lab_session, tmp_path_factory):
    """Every lab host with a bare Hermes home, then deployed at HEAD by fleet-update."""
    lab = _ssh_lab_session
    reset_to_bare_hermes(lab)
    inventory = lab.write_inventory(tmp_path_factory.mktemp("verify-fleet") / "inventory.yml")
    sha = resolve_sha("HEAD")
    code, out = run_update("--yes", "-i", str(inventory), "all", sha)
    assert code == 0, out
    yield lab, inventory, sha
    lab.heal()


def test_fleet_verify_passes_on_every_host(deployed):
    lab, inventory, sha = deployed
    code, out = run_fleet("verify", "-i", str(inventory), "--sha", sha, "all")
    assert code == 0, out
    assert f"{len(lab.hosts)}/{len(lab.hosts)} hosts passed every check" in out


def test_fleet_verify_with_hermes_checks_the_gateway(deployed):
    lab, inventory, sha = deployed
    status = "  Provider:  soulgraph\n  Plugin:    installed \u2713\n  Status:    available \u2713\n"
    for h in lab.hosts:
        lab.fake_commands(h, {"systemctl": FakeCommand(stdout="active\n"), "hermes": FakeCommand(stdout=status, by_args={
            "mcp test soul": "  \u2713 Connected (700ms)\n  \u2713 Tools discovered: 13\n"})})
    lab.fake_commands(lab.hosts[-1], {"systemctl": FakeCommand(stdout="failed\n", rc=3),
                                      "hermes": FakeCommand(stdout=status, by_args={
                                          "mcp test soul": "  \u2713 Connected (700ms)\n  \u2713 Tools discovered: 13\n"})})
    code, out = run_fleet("verify", "-i", str(inventory), "--hermes", "all")
    assert code == 2, out
    assert f"{lab.hosts[-1].name}: gateway_active: the gateway (hermes-gateway.service) is not running: failed" in out
    assert f"{len(lab.hosts) - 1}/{len(lab.hosts)} hosts passed every check" in out
    lab.heal()


def test_fleet_verify_refuses_a_tampered_key(deployed):
    lab, inventory, sha = deployed
    lab.tamper_known_hosts(lab.hosts[0])
    code, out = run_fleet("verify", "-i", str(inventory), "all")
    assert code == 4, out
    assert f"{lab.hosts[0].name}: key refused: " in out and "HOST KEY CHANGED" in out
    lab.heal()
