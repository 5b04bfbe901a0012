"""One host's update: connect, gather facts, run the roles, say how it went.

The roles run in this order (fleet-update): runtime → import_check → switch → hermes → gateway
(handlers); with `--soul`, the soul role runs after hermes. `fleet bootstrap` puts the
bootstrap role first. The only step that changes which
runtime is active is the atomic `current` switch, and it runs only after the import check passed.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from fleet import hermes_names, host_lock
from fleet.build import RuntimeBuilder
from fleet.connections import CommandTimeout, HostConnectionError
from fleet.facts import expand_home, gather
from fleet.inventory import Host
from fleet.operations import CHANGED, FAILED, OK, SKIPPED, Context
from fleet.roles import Play, Role, TaskReport, load_role
from fleet.soul import SoulTree

UPDATE_ROLES = ["runtime", "import_check", "switch", "hermes", "gateway"]
BOOTSTRAP_ROLES = ["bootstrap", *UPDATE_ROLES]
SOUL_ROLE = "soul"


def with_soul(roles: list[str]) -> list[str]:
    """The role list with the soul import after the Hermes install (it needs the seeded soul.json)."""
    at = roles.index("hermes") + 1 if "hermes" in roles else len(roles)
    return [*roles[:at], SOUL_ROLE, *roles[at:]]
UNREACHABLE, INTERRUPTED = "unreachable", "interrupted"


@dataclass
class HostResult:
    host: str
    status: str  # ok | changed | failed | unreachable | interrupted
    counts: dict[str, int] = field(default_factory=lambda: {OK: 0, CHANGED: 0, FAILED: 0,
                                                            SKIPPED: 0})
    sha: str | None = None  # the release `current` points at afterwards
    soul: str | None = None  # the layered soul commit imported (with --soul)
    problems: list[str] = field(default_factory=list)  # what the operator must fix, the host not failed
    notes: list[str] = field(default_factory=list)  # what the host is now, where the run left it unusually
    seconds: float = 0.0
    message: str = ""
    reports: list[TaskReport] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)


class LazyWheelhouse(os.PathLike):
    """The wheelhouse path, built on first use: a host already at the sha never needs it."""

    def __init__(self, builder: RuntimeBuilder, facts: dict[str, Any], extras: tuple[str, ...] = ()):
        self.builder, self.facts, self.extras = builder, facts, extras

    def __fspath__(self) -> str:
        f = self.facts
        return str(self.builder.wheelhouse(f["platform"], f["arch"], f["python_version"], self.extras))

    def __str__(self) -> str:
        return self.__fspath__()


def host_variables(host: Host, facts: dict[str, Any], sha: str, *, restart_gateway: bool,
                   builder: RuntimeBuilder | None, soul: SoulTree | None = None,
                   force_gateway_restart: bool = False) -> dict[str, Any]:
    home = facts["home"]
    hvars = dict(host.vars)
    runtime_dir = expand_home(str(hvars["runtime_dir"]), home)
    release_dir = f"{runtime_dir}/releases/{sha}"
    names = hermes_names.resolve(expand_home(str(hvars["hermes_home"]), home), home, facts.get("active_profile"))
    hvars.update(
        host_name=host.name, home=home, sha=sha,
        platform=facts["platform"], uid=facts["uid"], arch=facts["arch"],
        python=expand_home(str(hvars["python"]), home),
        runtime_dir=runtime_dir, release_dir=release_dir,
        release_python=f"{release_dir}/venv/bin/python",
        hermes_home=expand_home(str(hvars["hermes_home"]), home),
        hermes_config_exists=facts["config_exists"],
        deployed_sha=facts["deployed_sha"],
        gateway_runtime=facts.get("gateway_runtime"),
        restart_gateway=restart_gateway or force_gateway_restart,
        force_gateway_restart=force_gateway_restart,
        wheelhouse=LazyWheelhouse(builder, facts, ("embed",) if hvars.get("soul_embed") else ()) if builder else "",
        # The gateway of the home the agent runs from (a profile's has its own name), unless the
        # inventory names it.
        **{key: value for key, value in (("gateway_unit", names.unit), ("gateway_label", names.label))
           if key not in host.vars},
        hermes_profile=names.profile,
        hermes_agent_home=names.home,  # the home the agent runs from: the active profile's
        soul_commit=soul.commit if soul else None,
        soul_origin=soul.spec.origin if soul else None,
        soul_archive=str(soul.archive) if soul else None,
    )
    return hvars


def load_roles(names: list[str]) -> list[Role]:
    return [load_role(name) for name in names]


def update_host(host: Host, *, sha: str, builder: RuntimeBuilder, roles: list[Role],
                check: bool = False, show_diff: bool = False, restart_gateway: bool = False,
                on_report: Callable[[str, TaskReport], None] | None = None,
                should_stop: Callable[[], bool] = lambda: False, soul: SoulTree | None = None,
                force_gateway_restart: bool = False) -> HostResult:
    started = time.monotonic()
    result = HostResult(host.name, OK)
    conn = host.connection()
    lock = None
    play: Play | None = None
    try:
        facts = gather(conn, host.vars)
        result.facts, result.sha = facts, facts["deployed_sha"]
        if facts["python_version"] is None:
            result.status, result.message = FAILED, f"no Python at {host.vars['python']}"
            result.counts[FAILED] += 1
            return result
        try:
            lock = host_lock.take(conn, expand_home(str(host.vars["python"]), facts["home"]),
                                  expand_home(str(host.vars["runtime_dir"]), facts["home"]),
                                  host_lock.owner_text("check" if check else "update", sha))
        except host_lock.HostLocked as exc:
            result.status, result.message = FAILED, str(exc)
            result.counts[FAILED] += 1
            return result
        ctx = Context(conn, check=check, show_diff=show_diff, facts=facts,
                      vars=host_variables(host, facts, sha, restart_gateway=restart_gateway,
                                          builder=builder, soul=soul,
                                          force_gateway_restart=force_gateway_restart))
        play = Play(roles, ctx, on_report=(lambda r: on_report(host.name, r)) if on_report else None,
                    should_stop=should_stop)
        play.run()
        _summarise(result, play, sha, check, soul)
        if play.stopped and result.status != FAILED:
            result.status, result.message = INTERRUPTED, "stopped by Ctrl-C between tasks"
    except HostConnectionError as exc:
        result.status, result.message = UNREACHABLE, str(exc)
        _summarise(result, play, sha, check, soul, dropped=True)
    except CommandTimeout as exc:
        result.status, result.message = FAILED, str(exc)
        _summarise(result, play, sha, check, soul, dropped=True)
        result.counts[FAILED] += 1
    finally:
        if lock is not None:
            try:
                lock.release()
            except HostConnectionError:
                pass  # the connection is gone, and with it the lock
        conn.close()
        result.seconds = time.monotonic() - started
    return result


def _summarise(result: HostResult, play: Play | None, sha: str, check: bool, soul: SoulTree | None,
               dropped: bool = False) -> None:
    """Count what the play did and say where it left the host: on a run that ended normally,
    or (`dropped`) one whose host stopped answering or timed out mid-play, whose finished
    tasks still count: a host lost right after its switch runs the new release."""
    if play is None:
        return
    result.reports = play.reports
    for report in play.reports:
        result.counts[report.outcome.status] += 1
        if report.outcome.data.get("problem"):
            result.problems.append(f"{report.role} | {report.task}: {report.outcome.data['problem']}")
    switched = [r for r in play.reports if r.role == "switch" and r.task.startswith("switch")]
    if not check and switched and switched[0].outcome.status in (OK, CHANGED):
        result.sha = sha
    imported = [r for r in play.reports if r.role == SOUL_ROLE and r.outcome.status in (OK, CHANGED)]
    if imported and not check:
        result.soul = imported[0].outcome.data.get("commit") or (soul.commit if soul else None)
    entry = [r for r in play.reports if r.role == "hermes" and r.outcome.status in (OK, CHANGED)]
    before, entry_sha = result.facts.get("deployed_sha"), result.facts.get("entry_sha")
    if dropped:
        if result.sha == sha and before != sha:
            result.notes.append(
                f"now on {sha[:12]}: `current` was switched before the host stopped answering, "
                + ("and Hermes' soul entry names it" if entry else
                   f"but Hermes' soul entry was not rewritten (it still names {(entry_sha or 'no release')[:12]}); "
                   "the next run completes it"))
        return
    failures = [r for r in play.reports if r.outcome.failed]
    if failures:
        result.status = FAILED
        result.message = f"{failures[0].role}/{failures[0].task}: {failures[0].outcome.message}"
    elif result.counts[CHANGED]:
        result.status = CHANGED
    if not check and before == sha and entry_sha and entry_sha != sha \
            and any(r.outcome.status == CHANGED for r in entry):
        result.notes.append(f"repaired: `current` already named {sha[:12]} but Hermes' soul entry named "
                            f"{entry_sha[:12]} (an earlier run stopped after its switch); the entry now names it")
