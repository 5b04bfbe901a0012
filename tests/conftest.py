"""Shared fixtures: the real Hermes client and the SSH lab. Helpers live in plain modules here.

Outside CI a fixture whose real part cannot run here (no root for the lab, no package index
for Hermes) skips with the reason. In CI (CI set) everything is installed, so it fails.
"""

from __future__ import annotations

import os
import signal

import pytest

import soulgraph.memory  # noqa: F401  the write guard, installed as every command that writes installs it
from tests import hermes_client
from tests.lab import Lab, unavailable_reason


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "lab: needs the real SSH lab (root and /usr/sbin/sshd; see .ci/setup-system)")
    # A suite started in the background by a non-interactive shell inherits SIGINT ignored, and
    # so would every command it starts: the Ctrl-C tests would test nothing. Python's own handler
    # back, so children start with SIGINT as a terminal gives it.
    signal.signal(signal.SIGINT, signal.default_int_handler)


# The files that take longest (`--durations` on the 2-core CI machine, slowest first). ./run-tests
# hands files to its workers in collection order (--no-loadscope-reorder; xdist's own order puts
# files of many tests first), so these start first and no worker is left with a long file at the
# end while the other waits.
SLOW_FILES = ("test_doc_samples.py", "test_fleet_faults_lab.py", "test_fleet_lab.py", "test_tutorial.py",
              "test_store_model.py", "test_graph_properties.py", "test_hermes_provider_loop.py",
              "test_fleet_soul_collect_lab.py", "test_agent_surface.py", "test_fleet_memory_lab.py",
              "test_hermes_provider.py", "test_bootstrap_lab.py", "test_fleet_memories_web_lab.py",
              "test_soul_fleet_lab.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: place for place, name in enumerate(SLOW_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(SLOW_FILES)))  # stable: the rest keep their order


def skip_or_fail(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI must be able to run this: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def hermes_exe():
    """The real Hermes CLI in its own venv, built once and cached."""
    try:
        return hermes_client.ensure_hermes_venv()
    except hermes_client.HermesUnavailable as exc:
        skip_or_fail(f"cannot create the Hermes venv ({hermes_client.HERMES_REQUIREMENT}): {exc}")


@pytest.fixture
def hermes_home(hermes_exe, tmp_path):
    """A fresh Hermes home, written by Hermes itself."""
    return hermes_client.make_hermes_home(tmp_path / "hermes-home")


def lab_fixture(n: int, scope: str = "module"):
    """Make a fixture yielding an n-host Lab, e.g. `big_lab = lab_fixture(20)` in a test module."""

    @pytest.fixture(scope=scope)
    def _lab():
        reason = unavailable_reason()
        if reason:
            skip_or_fail(reason)
        with Lab(n) as lab:
            yield lab

    return _lab


_ssh_lab_session = lab_fixture(5, scope="session")


@pytest.fixture
def ssh_lab(_ssh_lab_session: Lab) -> Lab:
    """The session's 5-host lab, healed after each test (stopped hosts restarted, known_hosts
    restored, stand-in commands removed), so fault injection never leaks between tests."""
    yield _ssh_lab_session
    _ssh_lab_session.heal()
