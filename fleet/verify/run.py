"""run_verify(): the host checks of host_checks.py, run in-process by pytest on every target."""

from __future__ import annotations

import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import pytest

from fleet.connections.base import AuthenticationFailed, HostConnectionError, HostKeyRejected

from .report import FAIL, OK, SKIP, VerifyReport
from .sessions import DEFAULT_FORKS, HostSessions
from .target import VerifyTarget

CHECKS_MODULE = Path(__file__).with_name("host_checks.py")

# Exit codes, as fleet-update's: a check failed / a host could not be reached or was refused.
EXIT_OK, EXIT_FAILED, EXIT_ERROR, EXIT_UNREACHABLE = 0, 2, 3, 4


@dataclass(frozen=True)
class VerifySettings:
    hermes: bool
    sha: str | None
    soul: str | None = None  # the layered soul commit every host should have imported
    soul_origin: str | None = None
    full: bool = False  # run the MCP self-check on every host, even where its record still holds


class VerifyPlugin:
    """Feeds the targets to pytest and turns its reports into a VerifyReport."""

    def __init__(self, targets: list[VerifyTarget], settings: VerifySettings, forks: int = DEFAULT_FORKS):
        self.targets = targets
        self.settings = settings
        self.sessions = HostSessions(targets, forks, settings.hermes, settings.full)
        self.report = VerifyReport([t.name for t in targets])
        self.problems: list[str] = []  # pytest-level trouble: collection errors and the like
        self._where: dict[str, tuple[str, str]] = {}  # nodeid -> (host, check)

    @pytest.fixture(scope="session")
    def verify_sessions(self) -> HostSessions:
        return self.sessions

    @pytest.fixture(scope="session")
    def verify_settings(self) -> VerifySettings:
        return self.settings

    def pytest_configure(self, config):
        config.addinivalue_line("markers", "hermes: checked only with --hermes (the gateway)")

    def pytest_generate_tests(self, metafunc):
        if "target" in metafunc.fixturenames:
            metafunc.parametrize("target", self.targets, ids=[t.name for t in self.targets],
                                 scope="module")

    def pytest_collection_modifyitems(self, config, items):
        if not self.settings.hermes:
            skipped = [i for i in items if i.get_closest_marker("hermes")]
            items[:] = [i for i in items if not i.get_closest_marker("hermes")]
            config.hook.pytest_deselected(items=skipped)
        for item in items:
            check = item.originalname.removeprefix("test_")
            self._where[item.nodeid] = (item.callspec.params["target"].name, check)

    def pytest_collection_finish(self, session):
        self.sessions.start()  # connect everywhere at once, before the first check waits on it

    def pytest_collectreport(self, report):
        if report.failed:
            self.problems.append(f"cannot collect {report.nodeid}: {report.longreprtext}")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        host, check = self._where[item.nodeid]
        if report.passed and report.when == "call":
            self.report.record(host, check, OK)
        elif report.skipped:
            self.report.record(host, check, SKIP, str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else "")
        elif report.failed:
            error = call.excinfo.value if call.excinfo else None
            if isinstance(error, HostConnectionError):
                self.report.mark_unreachable(host, str(error), _connection_kind(error))
            else:
                self.report.record(host, check, FAIL, _reason(call.excinfo, report))

    def pytest_sessionfinish(self, session):
        self._note_reused("self_check_recorded_at", "mcp_tools", "mcp_tools",
                          "the MCP self-check recorded by an earlier verification, as the runtime, its interpreter "
                          "and the soul file are unchanged since (--full runs it again)")
        self._note_reused("hermes_check_recorded_at", "hermes_client_sees_soul",
                          "hermes_client_sees_soul, hermes_memory_provider",
                          "Hermes' own answers recorded by an earlier verification, as the runtime, Hermes' "
                          "config.yaml, the plugin and the Hermes install are unchanged since (--full runs them again)")
        self.sessions.close()

    def _note_reused(self, recorded: str, check: str, checks: str, why: str) -> None:
        """A note naming the hosts where `check` passed on an answer a record kept (`recorded`:
        the session's attribute saying when it was recorded)."""
        reused = [name for name, s in self.sessions.by_name.items()
                  if getattr(s, recorded) and name in self.report.checked(check)]
        if reused:
            shown = ", ".join(reused[:5]) + (f" and {len(reused) - 5} more" if len(reused) > 5 else "")
            self.report.notes.append(f"{checks}: {shown}: {why}")


def _connection_kind(error: HostConnectionError) -> str:
    if isinstance(error, HostKeyRejected):
        return "key refused"
    if isinstance(error, AuthenticationFailed):
        return "login refused"
    return "unreachable"


def _reason(excinfo, report) -> str:
    """One line: the check's own message (first line of the assertion), else the error."""
    if excinfo is None:
        lines = report.longreprtext.strip().splitlines()
        return lines[-1] if lines else "failed"
    error = excinfo.value
    first = (str(error).strip().splitlines() or [""])[0]
    if isinstance(error, (AssertionError, pytest.fail.Exception)):
        # pytest's rewritten "assert ..." detail follows our message on later lines.
        return first or "assertion failed"
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


def run_verify(hosts: list[VerifyTarget], *, hermes: bool, sha: str | None = None,
               soul: str | None = None, soul_origin: str | None = None, out: TextIO | None = None,
               forks: int = DEFAULT_FORKS, full: bool = False) -> int:
    """Check every host; print a host × check summary to `out` (default: sys.stdout as it is at
    the call, not at import, so a CLI runner's captured stdout is honoured).

    Returns 0 when every check passed on every host, 2 when a check failed, 4 when a host could
    not be reached or its key was refused (4 wins over 2), 3 when pytest itself could not run.
    """
    out = out if out is not None else sys.stdout
    names = [h.name for h in hosts]
    if len(set(names)) != len(names):
        raise ValueError(f"host names must be unique: {names}")
    if not hosts:
        out.write("verify: no hosts\n")
        return EXIT_OK
    plugin = VerifyPlugin(list(hosts), VerifySettings(hermes=hermes, sha=sha, soul=soul, soul_origin=soul_origin,
                                                      full=full), forks)
    args = [
        str(CHECKS_MODULE),
        "-c", os.devnull,  # not the project's pytest settings (addopts, testpaths)
        "--rootdir", str(CHECKS_MODULE.parent), "--confcutdir", str(CHECKS_MODULE.parent),
        "-p", "no:cacheprovider",  # never write .pytest_cache next to an installed package
        "-p", "no:terminal",  # the summary below is the output
        "-p", "no:pytest11.testinfra",  # its `host` fixture and --hosts are replaced by ours
        "-W", "ignore::DeprecationWarning",
    ]
    pytest_output = io.StringIO()
    saved = sys.stdout
    try:
        sys.stdout = pytest_output  # pytest's own chatter, shown only if it went wrong
        status = pytest.main(args, plugins=[plugin])
    finally:
        sys.stdout = saved
    out.write(plugin.report.render())
    if plugin.problems or status not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        out.write(f"verification could not run (pytest exit {int(status)}):\n")
        for problem in plugin.problems:
            out.write(problem + "\n")
        out.write(pytest_output.getvalue())
        return EXIT_ERROR
    if plugin.report.any_unreachable:
        return EXIT_UNREACHABLE
    return EXIT_FAILED if plugin.report.any_failed else EXIT_OK
