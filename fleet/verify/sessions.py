"""One connection per host, opened for every host at once, with the slow self-check started early.

pytest runs checks one after another; on 20 hosts, connecting and starting each host's MCP server
in turn would dominate the run. So every host is connected and its `soulgraph.check` started in a
bounded thread pool before the first check, and the checks pick up the results. paramiko runs the
check on its own channel, so the other checks can use the same connection meanwhile.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

from testinfra.backend.base import CommandResult
from testinfra.host import Host

from fleet.facts import sh_path
from fleet.hermes_names import profile_command

from .backend import host_for
from .target import HostLayout, VerifyTarget

DEFAULT_FORKS = 10  # hosts worked on at once, as fleet-update's --forks


class HostSession:
    """A target's testinfra Host, its connection outcome, layout and self-check result."""

    def __init__(self, target: VerifyTarget):
        self.target = target
        self.host: Host = host_for(target)
        self.connected: Future[HostLayout] = Future()
        self.self_check: Future[CommandResult] = Future()

    def open(self) -> None:
        """Connect and learn the layout, then run the self-check (in a worker thread)."""
        try:
            # The first command connects; it also reads Hermes' active_profile (one round trip).
            found = self.host.run(f'printf "%s\\n" "$HOME"; {profile_command(sh_path(self.target.hermes_home))}')
            home, _, profile = found.stdout.partition("\n")
            if found.rc != 0 or not home.startswith("/"):
                raise RuntimeError(f"{self.target.name}: cannot read $HOME: {found.stderr.strip()}")
            layout = HostLayout.of(self.target, home, profile.strip() or None)
        except BaseException as exc:
            self.connected.set_exception(exc)
            self.self_check.set_exception(exc)
            return
        self.connected.set_result(layout)
        try:
            self.self_check.set_result(self.host.run(
                "%s -m soulgraph.check --soul-file %s" + " %s" * len(layout.toolset_args),
                layout.current_python, layout.soul_file, *layout.toolset_args))
        except BaseException as exc:
            self.self_check.set_exception(exc)

    def close(self) -> None:
        self.host.backend.close()


class HostSessions:
    def __init__(self, targets: list[VerifyTarget], forks: int = DEFAULT_FORKS):
        self.by_name = {t.name: HostSession(t) for t in targets}
        self._pool = ThreadPoolExecutor(max_workers=max(1, min(forks, len(targets))),
                                        thread_name_prefix="verify")
        self._started = False

    def start(self) -> None:
        if not self._started:
            self._started = True
            for session in self.by_name.values():
                self._pool.submit(session.open)

    def __getitem__(self, name: str) -> HostSession:
        return self.by_name[name]

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        for session in self.by_name.values():
            session.close()
