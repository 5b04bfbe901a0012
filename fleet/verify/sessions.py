"""Every host read at once, before the checks look: connect, one batch of facts, then the
follow-up commands (probes.py), in a pool of --forks worker threads.

pytest runs the checks one after another; if they talked to the hosts themselves, 20 hosts would
cost 20 times one host's round trips. Here each host's worker does all of that host's talking,
and the checks wait only on that host's futures, so the run takes about as long as the slowest
host. paramiko gives each command its own channel on the host's one connection.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import Future, ThreadPoolExecutor

from testinfra.host import Host

from fleet.facts import sh_path
from fleet.hermes_names import profile_command
from fleet.shell_batch import batch_command, new_nonce, parse_batch

from .backend import host_for
from .probes import (HERMES_CLIENT_PROBES, HostFacts, Probe, fact_commands, followup_commands, hermes_check_record,
                     hermes_check_record_path, recorded_hermes_check, recorded_self_check, self_check_record,
                     self_check_record_path)
from .target import HostLayout, VerifyTarget

DEFAULT_FORKS = 10  # hosts worked on at once, as fleet-update's --forks


class HostSession:
    """A target's testinfra Host and what was read there, as futures the checks wait on."""

    def __init__(self, target: VerifyTarget, hermes: bool = False, full: bool = False):
        self.target = target
        self.hermes = hermes
        self.full = full  # run the MCP self-check even where its record still holds
        self.self_check_recorded_at: str | None = None  # set when its record was reused
        self.hermes_check_recorded_at: str | None = None  # ... and Hermes' client checks'
        self.host: Host = host_for(target)
        self.connected: Future[HostLayout] = Future()
        self.facts: Future[HostFacts] = Future()
        self.followups: Future[dict[str, Future[Probe]]] = Future()  # known once the facts are

    def probe(self, name: str, timeout: float | None = None) -> Probe | None:
        """A follow-up probe's result (raising what stopped it); None when it did not apply."""
        pending = self.followups.result(timeout).get(name)
        return None if pending is None else pending.result(timeout)

    def open(self) -> None:
        """All of this host's reads, in a worker thread; each future gets a result or the error."""
        try:
            layout = self._layout()
            self.connected.set_result(layout)
            reads, nonce = fact_commands(layout), new_nonce()
            batch = self.host.run(batch_command(reads, nonce))
            answers = parse_batch(_text(batch.stdout_bytes), nonce, reads)
            facts = HostFacts({name: Probe(rc, out) for name, (rc, out) in answers.items()}, layout)
            self.facts.set_result(facts)
            recorded = None if self.full else recorded_self_check(facts)
            hermes_recorded = None if self.full or not self.hermes or not facts["hermes_command"].ok \
                else recorded_hermes_check(facts)
            commands = followup_commands(self.target, layout, facts, self.hermes, self_check=recorded is None,
                                         hermes_client=hermes_recorded is None)
            pending: dict[str, Future[Probe]] = {name: Future() for name in commands}
            if recorded is not None:
                answer, self.self_check_recorded_at = recorded
                pending["self_check"] = Future()
                pending["self_check"].set_result(answer)
            if hermes_recorded is not None:
                answers, self.hermes_check_recorded_at = hermes_recorded
                for name, answer in answers.items():
                    pending[name] = Future()
                    pending[name].set_result(answer)
            self.followups.set_result(pending)
        except BaseException as exc:  # every check of the host fails with it (unreachable, ...)
            for future in (self.connected, self.facts, self.followups):
                if not future.done():
                    future.set_exception(exc)
            return
        for name, command in commands.items():
            try:
                result = self.host.run(command)
                found = Probe(result.rc, _text(result.stdout_bytes), _text(result.stderr_bytes))
            except BaseException as exc:  # only its own check fails with this (a timeout, say)
                pending[name].set_exception(exc)
                continue
            if name == "self_check":
                self._record(facts, found)
            pending[name].set_result(found)
        hermes_answers = {name: pending[name].result() for name in HERMES_CLIENT_PROBES
                          if name in commands and pending[name].exception() is None}
        if len(hermes_answers) == len(HERMES_CLIENT_PROBES) and all(p.ok for p in hermes_answers.values()):
            self._put(hermes_check_record(facts, hermes_answers, _stamp()), hermes_check_record_path(facts.layout))

    def _record(self, facts: HostFacts, self_check: Probe) -> None:
        """Keep a passed self-check's answer for the next verification (recorded_self_check)."""
        try:
            report = json.loads(self_check.out)
        except ValueError:
            return
        if self_check.ok and isinstance(report, dict) and report.get("ok"):
            self._put(self_check_record(facts, report, _stamp()), self_check_record_path(facts.layout))

    def _put(self, data: bytes, path: str) -> None:
        try:  # the fleet connection's atomic write, readable by the host's user only
            self.host.backend.put(data, path, 0o600)
        except Exception:
            pass  # no record: the next verification runs the check again

    def _layout(self) -> HostLayout:
        # The first command connects; it also reads Hermes' active_profile (one round trip).
        found = self.host.run(f'printf "%s\\n" "$HOME"; {profile_command(sh_path(self.target.hermes_home))}')
        home, _, profile = found.stdout.partition("\n")
        if found.rc != 0 or not home.startswith("/"):
            raise RuntimeError(f"{self.target.name}: cannot read $HOME: {found.stderr.strip()}")
        return HostLayout.of(self.target, home, profile.strip() or None)

    def close(self) -> None:
        self.host.backend.close()


def _stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


class HostSessions:
    def __init__(self, targets: list[VerifyTarget], forks: int = DEFAULT_FORKS, hermes: bool = False,
                 full: bool = False):
        self.by_name = {t.name: HostSession(t, hermes, full) for t in targets}
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
