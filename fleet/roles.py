"""Roles: folders of YAML tasks run in order on one host, with handlers run once at the end.

    roles/<name>/tasks.yaml      the task list
    roles/<name>/defaults.yaml   default variables (the inventory's host vars win over them)
    roles/<name>/handlers.yaml   tasks run once per host, only when a changed task notified them
    roles/<name>/templates/      Jinja2 files for `template` tasks

A task is a mapping with one task kind (see fleet/operations) and optional keys:
`name`, `when` (a Jinja2 expression: run only when true), `notify` (handler name or list),
`ignore_errors` (report the failure and go on), `register` (keep the outcome as a variable),
`commits` (once this task changed the host, Ctrl-C no longer stops it: the tasks after it
run, so the host ends on the new release with its Hermes entry, never between).
Every string in a task is rendered with Jinja2; an undefined variable is an error.
docs/roles.md has the full format.
"""

from __future__ import annotations

import time

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from fleet.connections import HostConnectionError
from fleet.operations import (CHANGED, FAILED, OK, REGISTRY, SKIPPED, Context, Outcome)
from fleet.operations.base import READS
from fleet.templating import evaluate_expression, render

class RoleError(Exception):
    """A role's files are wrong: the message names the file and the task."""


def _roles_dir() -> Path:
    """The repository's roles/ in a checkout; in an installed operator package, the same files
    shipped as the package data `fleet.roles_data` (pyproject.toml)."""
    checkout = Path(__file__).resolve().parent.parent / "roles"
    if checkout.is_dir():
        return checkout
    import importlib.util

    spec = importlib.util.find_spec("fleet.roles_data")
    if spec is None or not spec.submodule_search_locations:
        raise RoleError("the roles are missing: neither a checkout's roles/ nor the installed fleet.roles_data")
    return Path(list(spec.submodule_search_locations)[0])


ROLES_DIR = _roles_dir()
TASK_KEYS = {"name", "when", "notify", "ignore_errors", "register", "commits"}


@dataclass
class Task:
    role: str
    name: str
    kind: str
    args: dict[str, Any]
    when: str | None = None
    notify: list[str] = field(default_factory=list)
    ignore_errors: bool = False
    register: str | None = None
    commits: bool = False


@dataclass
class Role:
    name: str
    folder: Path
    tasks: list[Task]
    defaults: dict[str, Any]
    handlers: list[Task]

    @property
    def templates_dir(self) -> Path:
        return self.folder / "templates"


def _read_yaml(path: Path, default: Any) -> Any:
    if not path.exists():
        return default
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise RoleError(f"{path}: not valid YAML: {exc}") from None
    return default if data is None else data


def parse_tasks(role: str, path: Path, data: Any) -> list[Task]:
    if not isinstance(data, list):
        raise RoleError(f"{path}: must be a list of tasks")
    tasks = []
    for i, item in enumerate(data, 1):
        if not isinstance(item, dict):
            raise RoleError(f"{path}: task {i} must be a mapping")
        kinds = [k for k in item if k not in TASK_KEYS]
        if len(kinds) != 1 or kinds[0] not in REGISTRY:
            raise RoleError(f"{path}: task {i} ({item.get('name', 'unnamed')}) must have exactly "
                            f"one task kind of {', '.join(sorted(REGISTRY))}; it has {kinds}")
        args = item[kinds[0]] or {}
        if not isinstance(args, dict):
            raise RoleError(f"{path}: task {i}: the arguments of {kinds[0]} must be a mapping")
        notify = item.get("notify") or []
        tasks.append(Task(role, str(item.get("name") or kinds[0]), kinds[0], args,
                          when=item.get("when"),
                          notify=[notify] if isinstance(notify, str) else list(notify),
                          ignore_errors=bool(item.get("ignore_errors")),
                          register=item.get("register"),
                          commits=bool(item.get("commits"))))
    return tasks


def load_role(name: str, roles_dir: Path = ROLES_DIR) -> Role:
    folder = roles_dir / name
    if not folder.is_dir():
        raise RoleError(f"no role {name!r} in {roles_dir}")
    defaults = _read_yaml(folder / "defaults.yaml", {})
    if not isinstance(defaults, dict):
        raise RoleError(f"{folder / 'defaults.yaml'}: must be a mapping")
    return Role(name, folder,
                parse_tasks(name, folder / "tasks.yaml", _read_yaml(folder / "tasks.yaml", [])),
                defaults,
                parse_tasks(name, folder / "handlers.yaml",
                            _read_yaml(folder / "handlers.yaml", [])))


def false_clause(expression: str, variables: dict[str, Any]) -> str:
    """Of `a and b and c` (split at the top level, outside brackets), the first part that is
    false: what a skipped task's line names. The whole expression when it is no conjunction."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(expression):
        depth += char in "([{"
        depth -= char in ")]}"
        if depth == 0 and expression.startswith(" and ", i):
            parts.append(expression[start:i])
            start = i + 5
    parts.append(expression[start:])
    for part in parts:
        try:
            if not evaluate_expression(part.strip(), variables):
                return part.strip()
        except Exception:
            return expression
    return expression


@dataclass
class TaskReport:
    role: str
    task: str
    outcome: Outcome
    ignored: bool = False
    seconds: float = 0.0  # how long the task took on the host (its build included)


OnReport = Callable[[TaskReport], None]


class Play:
    """Runs roles on one host: tasks in order, a failure stops the host (unless ignored),
    then the notified handlers, once each. `should_stop` is polled between tasks (Ctrl-C)."""

    def __init__(self, roles: list[Role], ctx: Context, on_report: OnReport | None = None,
                 should_stop: Callable[[], bool] = lambda: False):
        self.roles, self.ctx = roles, ctx
        self.on_report = on_report or (lambda r: None)
        self.should_stop = should_stop
        self.reports: list[TaskReport] = []
        self.notified: list[str] = []
        self.stopped = False  # by a failure or Ctrl-C: the remaining tasks did not run

    def variables(self, base: dict[str, Any]) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for role in self.roles:
            merged.update(role.defaults)
        merged.update(base)
        # Defaults may refer to host vars ("{{ runtime_dir }}/releases"): render them once.
        for role in self.roles:
            for key in role.defaults:
                if key not in base:
                    merged[key] = render(merged[key], merged)
        return merged

    def run(self) -> list[TaskReport]:
        self.ctx.vars = self.variables(self.ctx.vars)
        self.ctx.read_ahead(self.reads_ahead())
        committed = False  # a `commits` task changed the host: finish even on Ctrl-C
        for role in self.roles:
            for task in role.tasks:
                if self.should_stop() and not committed:
                    self.stopped = True
                    return self.reports
                report = self.run_task(role, task)
                if report.outcome.status not in (OK, SKIPPED):
                    self.ctx.forget_reads()  # the host changed (or may have): read it anew
                committed = committed or (task.commits and report.outcome.changed and not self.ctx.check)
                if report.outcome.changed:
                    self.notified += [h for h in task.notify if h not in self.notified]
                if report.outcome.failed and not task.ignore_errors:
                    self.stopped = True
                    return self.reports
        handlers = {h.name: (role, h) for role in self.roles for h in role.handlers}
        failed = next((r for r in self.reports if r.outcome.failed), None)
        for name in self.notified:
            if name not in handlers:
                raise RoleError(f"a task notified {name!r}, but no role defines that handler")
            role, handler = handlers[name]
            if failed is not None:  # never restart what serves a host that failed (even an ignored failure)
                self._report(role, handler, Outcome(SKIPPED, f"the host failed ({failed.role} | {failed.task})"))
                continue
            self.run_task(role, handler)
        return self.reports

    def reads_ahead(self) -> list[str]:
        """The read-only commands the tasks will start with, as far as can be told before they
        run (their `when` on today's variables): on a host with nothing to change, the tasks'
        reads then cost one round trip, not one each (Context.read_ahead)."""
        commands: list[str] = []
        for role in self.roles:
            for task in role.tasks:
                if task.kind not in READS:
                    continue
                needs, read = READS[task.kind]
                try:
                    if task.when is not None and not evaluate_expression(str(task.when), self.ctx.vars):
                        continue
                    commands += read(**render({k: task.args[k] for k in needs if k in task.args}, self.ctx.vars))
                except Exception:
                    continue  # it depends on what an earlier task registers: it reads for itself
        return commands

    def run_task(self, role: Role, task: Task) -> TaskReport:
        started = time.monotonic()
        try:
            if task.when is not None and not evaluate_expression(str(task.when), self.ctx.vars):
                outcome = Outcome(SKIPPED, f"when: {false_clause(str(task.when), self.ctx.vars)} is false")
            else:
                args = render(task.args, self.ctx.vars)
                if task.kind == "template":
                    args["templates_dir"] = str(role.templates_dir)
                outcome = REGISTRY[task.kind](self.ctx, **args)
        except HostConnectionError:
            raise  # the host is gone: the runner reports it unreachable
        except Exception as exc:  # a role bug, a failed build, a timeout: this task failed
            outcome = Outcome(FAILED, f"{type(exc).__name__}: {exc}")
        if task.register:
            self.ctx.vars[task.register] = {"status": outcome.status,
                                           "changed": outcome.status == CHANGED,
                                           "data": outcome.data}
        return self._report(role, task, outcome, time.monotonic() - started)

    def _report(self, role: Role, task: Task, outcome: Outcome, seconds: float = 0.0) -> TaskReport:
        report = TaskReport(role.name, task.name, outcome, ignored=outcome.failed and task.ignore_errors,
                            seconds=seconds)
        self.reports.append(report)
        self.on_report(report)
        return report
