"""Fixtures shared across the suite. Test helpers live in plain modules beside this file."""

import os

import pytest

import hermes_client


@pytest.fixture(scope="session")
def hermes_exe():
    """The real Hermes CLI in its own venv, built once and cached."""
    try:
        return hermes_client.ensure_hermes_venv()
    except hermes_client.HermesUnavailable as exc:
        if os.environ.get("CI"):
            raise  # CI installs everything; a missing Hermes there is a failure, not a skip
        pytest.skip(f"cannot create the Hermes venv ({hermes_client.HERMES_REQUIREMENT}): {exc}")


@pytest.fixture
def hermes_home(hermes_exe, tmp_path):
    """A fresh Hermes home, written by Hermes itself."""
    return hermes_client.make_hermes_home(tmp_path / "hermes-home")
