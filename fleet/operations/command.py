"""command: run a shell command, and say whether it changed anything.

`creates: PATH` — the command's job is done when PATH exists (then it is not run: ok).
`changed_when` — true/false, or a Jinja2 expression over `rc`, `stdout`, `stderr`
(e.g. "'updated' in stdout"); default true. `problem_when` (an expression like changed_when)
with `problem` (a sentence): the command worked, but what it found is something the operator
must fix; the host is not failed, and the recap lists the problem. In check mode a command is
not run: it reports what it would do (or ok, when `creates` already exists).
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
            timeout: float | None = None, problem_when=False, problem: str = "") -> Outcome:
    if creates:
        if ctx.run(f"test -e {sh_path(creates)}").ok:
            return Outcome(OK, f"{creates} exists")
    if ctx.check:
        return Outcome(CHANGED if changed_when is not False else SKIPPED, f"would run: {cmd}")
    result = ctx.run(cmd, timeout=timeout or ctx.timeout)
    if not result.ok:
        return failed_result(result, cmd)
    seen = {**ctx.vars, "rc": result.rc, "stdout": result.stdout, "stderr": result.stderr}
    outcome = Outcome(CHANGED if evaluate(changed_when, seen) else OK, result.stdout.strip()[-500:],
                      data={"stdout": result.stdout})
    if problem_when is not False and evaluate(problem_when, seen):
        outcome.message = problem or result.stdout.strip()[-500:]
        outcome.data["problem"] = outcome.message
    return outcome
