"""What every operation shares: the context it runs in and the outcome it reports.

An operation reads the host's state first and only then changes what differs. In check mode it
stops after the read and reports what it would change. Outcomes: ok (already as wanted),
changed, failed, skipped.
"""

from __future__ import annotations

import difflib
import shlex
from dataclasses import dataclass, field
from typing import Any, Callable

from fleet.connections import Connection, Result

OK, CHANGED, FAILED, SKIPPED = "ok", "changed", "failed", "skipped"


@dataclass
class Outcome:
    status: str
    message: str = ""
    diff: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return self.status == CHANGED

    @property
    def failed(self) -> bool:
        return self.status == FAILED


class OperationError(Exception):
    """A task's arguments are wrong (a role bug, not a host problem)."""


@dataclass
class Context:
    conn: Connection
    check: bool = False
    show_diff: bool = False
    facts: dict[str, Any] = field(default_factory=dict)
    vars: dict[str, Any] = field(default_factory=dict)
    timeout: float = 600.0

    @property
    def host(self) -> str:
        return self.conn.host

    # Answers to read-only commands taken in one round trip before the tasks ran (read_ahead);
    # each is handed out once, and all are dropped as soon as a task changes the host.
    _read_ahead: dict[str, Result] = field(default_factory=dict, repr=False)

    def run(self, command: str, **kw) -> Result:
        kw.setdefault("timeout", self.timeout)
        return self.conn.run(command, **kw)

    def read(self, command: str) -> Result:
        """A read-only command's answer: the one read ahead when it still holds, else run now."""
        ahead = self._read_ahead.pop(command, None)
        return ahead if ahead is not None else self.run(command)

    def read_ahead(self, commands: list[str]) -> None:
        """Run these read-only commands in one round trip, for read() to hand out later."""
        from fleet.shell_batch import batch_command, new_nonce, parse_batch

        named = {f"r{i}": command for i, command in enumerate(dict.fromkeys(commands))}
        if not named:
            return
        nonce = new_nonce()
        answer = self.run(batch_command(named, nonce), timeout=min(self.timeout, 120))
        if not answer.ok:
            return  # the tasks read for themselves
        try:
            found = parse_batch(answer.stdout, nonce, named)
        except RuntimeError:
            return
        self._read_ahead = {command: Result(*found[name], "", command) for name, command in named.items()}

    def forget_reads(self) -> None:
        """The host changed: what was read ahead may no longer hold."""
        self._read_ahead.clear()


Operation = Callable[..., Outcome]
REGISTRY: dict[str, Operation] = {}
# kind -> (the task arguments its reads need, a function of those giving the read commands)
READS: dict[str, tuple[tuple[str, ...], Callable[..., list[str]]]] = {}


def operation(kind: str):
    """Register a function as the task kind `kind` (its keyword arguments are the task's)."""
    def register(fn: Operation) -> Operation:
        REGISTRY[kind] = fn
        return fn
    return register


def reads(kind: str, *needs: str):
    """Register the read-only commands task kind `kind` starts with (given the task arguments
    `needs`, and nothing else: others, like a wheelhouse, may be costly to render), so a run
    can take them all in one round trip ahead; the operation gets them through ctx.read()."""
    def register(fn: Callable[..., list[str]]) -> Callable[..., list[str]]:
        READS[kind] = (needs, fn)
        return fn
    return register


def q(value: Any) -> str:
    return shlex.quote(str(value))


def unified_diff(path: str, old: bytes | None, new: bytes) -> str:
    def lines(data: bytes | None) -> list[str]:
        return [] if data is None else data.decode("utf-8", "replace").splitlines(keepends=True)
    return "".join(difflib.unified_diff(lines(old), lines(new),
                                        "/dev/null" if old is None else f"{path} (before)",
                                        f"{path} (after)"))


def parse_mode(mode: Any) -> int | None:
    if mode is None:
        return None
    if isinstance(mode, int):
        return mode  # PyYAML already read 0644 as octal
    text = str(mode)
    return int(text[2:] if text.startswith("0o") else text, 8)


def failed_result(result: Result, what: str) -> Outcome:
    detail = (result.stderr.strip() or result.stdout.strip())[-1500:]
    return Outcome(FAILED, f"{what} exited {result.rc}" + (f": {detail}" if detail else ""))
