"""Check outcomes per host and the summary printed at the end of a verification."""

from __future__ import annotations

from dataclasses import dataclass, field

OK, FAIL, UNREACHABLE, SKIP = "ok", "FAIL", "unreachable", "skip"  # skip: not checkable here (the reason is kept)


@dataclass
class CheckOutcome:
    check: str
    status: str  # ok | FAIL
    reason: str = ""


@dataclass
class HostOutcome:
    name: str
    checks: dict[str, CheckOutcome] = field(default_factory=dict)
    unreachable: str = ""  # why the host could not be checked at all (down, key refused, ...)
    unreachable_kind: str = UNREACHABLE  # what the table cell says: unreachable | key refused | ...

    @property
    def failed(self) -> bool:
        return bool(self.unreachable) or any(c.status not in (OK, SKIP) for c in self.checks.values())


class VerifyReport:
    """Outcomes in the order checks ran; the first error of an unreachable host stands for all."""

    def __init__(self, host_names: list[str]):
        self.hosts = {name: HostOutcome(name) for name in host_names}
        self.checks: list[str] = []  # column order
        self.notes: list[str] = []  # printed under the table: how a result was reached

    def record(self, host: str, check: str, status: str, reason: str = "") -> None:
        if check not in self.checks:
            self.checks.append(check)
        outcome = self.hosts[host]
        if outcome.unreachable:
            return
        if check in outcome.checks and outcome.checks[check].status not in (OK, SKIP):
            return  # a teardown error never hides the failure that came first
        outcome.checks[check] = CheckOutcome(check, status, reason)

    def mark_unreachable(self, host: str, reason: str, kind: str = UNREACHABLE) -> None:
        outcome = self.hosts[host]
        if not outcome.unreachable:
            outcome.unreachable, outcome.unreachable_kind = reason, kind
            outcome.checks.clear()

    def checked(self, check: str) -> set[str]:
        """The hosts where `check` passed."""
        return {h.name for h in self.hosts.values() if not h.unreachable
                and check in h.checks and h.checks[check].status == OK}

    @property
    def any_unreachable(self) -> bool:
        return any(h.unreachable for h in self.hosts.values())

    @property
    def any_failed(self) -> bool:
        return any(h.failed for h in self.hosts.values())

    def render(self) -> str:
        """A host × check table, then one line per failure naming host, check and reason."""
        columns = ["host"] + self.checks
        rows = []
        for h in self.hosts.values():
            if h.unreachable:
                rows.append([h.name] + [h.unreachable_kind] + ["-"] * (len(self.checks) - 1))
            else:
                rows.append([h.name] + [h.checks[c].status if c in h.checks else "-"
                                        for c in self.checks])
        widths = [max(len(r[i]) for r in [columns] + rows) for i in range(len(columns))]
        line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
        out = [line(columns), line(["-" * w for w in widths])] + [line(r) for r in rows]

        problems = []
        for h in self.hosts.values():
            if h.unreachable:
                problems.append(f"  {h.name}: {h.unreachable_kind}: {h.unreachable}")
            problems += [f"  {h.name}: {c.check}: {c.reason}"
                         for c in h.checks.values() if c.status not in (OK, SKIP)]
        passed = sum(not h.failed for h in self.hosts.values())
        out.append("")
        out.append(f"{passed}/{len(self.hosts)} hosts passed every check")
        out += [f"note: {note}" for note in self.notes]
        if problems:
            out.append("failed:")
            out += problems
        return "\n".join(out) + "\n"
