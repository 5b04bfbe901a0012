"""command: run a shell command, and say whether it changed anything.

`creates: PATH` — the command's job is done when PATH exists (then it is not run: ok).
`changed_when` — true/false, or a Jinja2 expression over `rc`, `stdout`, `stderr`
(e.g. "'updated' in stdout"); default true. In check mode a command is not run: it reports
what it would do (or ok, when `creates` already exists).
"""

from __future__ import annotations

from fleet.facts import sh_path
from fleet.templating import evaluate_expression
from fleet.operations.base import (CHANGED, OK, SKIPPED, Context, Outcome, failed_result,
                                   operation)


def evaluate(expression, variables: dict) -> bool:
    if isinstance(expression, bool):
        return expression
    return evaluate_expression(str(expression), variables)


@operation("command")
def command(ctx: Context, cmd: str, creates: str | None = None, changed_when=True,
            timeout: float | None = None) -> Outcome:
    if creates:
        if ctx.run(f"test -e {sh_path(creates)}").ok:
            return Outcome(OK, f"{creates} exists")
    if ctx.check:
        return Outcome(CHANGED if changed_when is not False else SKIPPED, f"would run: {cmd}")
    result = ctx.run(cmd, timeout=timeout or ctx.timeout)
    if not result.ok:
        return failed_result(result, cmd)
    changed = evaluate(changed_when, {**ctx.vars, "rc": result.rc, "stdout": result.stdout,
                                      "stderr": result.stderr})
    return Outcome(CHANGED if changed else OK, result.stdout.strip()[-500:])
