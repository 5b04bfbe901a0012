"""Shared fixtures. The SSH lab fixtures live here so every test module can ask for them."""

from __future__ import annotations

import pytest

from tests.lab import Lab, unavailable_reason


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "lab: needs the real SSH lab (root and /usr/sbin/sshd; see .ci/setup-system)")


def lab_fixture(n: int, scope: str = "module"):
    """Make a fixture yielding an n-host Lab, e.g. `big_lab = lab_fixture(20)` in a test module.

    Skips (with the reason) when the machine cannot run the lab.
    """

    @pytest.fixture(scope=scope)
    def _lab():
        reason = unavailable_reason()
        if reason:
            pytest.skip(reason)
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
