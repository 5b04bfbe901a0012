"""module: run `python -m MODULE ARGS` on the host; its JSON answer says what happened.

The answer is the last JSON object on stdout. `status` is mapped (changed → changed,
unchanged → ok, skipped → skipped, error → failed); an answer with only `ok` is ok or failed.
In check mode the call runs with `check_args` added when the module has a dry run (e.g.
`--check`), otherwise it is not run. `in_temp_dir` runs it in a fresh temporary folder on the
host, removed afterwards (for checks that must not touch real files). `verdict_only`: the
module is itself a dry run (an installer's --check): "would change" is not a change here, so
only an error counts (failed), anything else is ok. `check_python`: in check mode, when
`python` (a release not installed yet) is missing, the dry run is made with this one (the
runtime the host runs now), so `--check --diff` still shows what the change would be.
`record`: where the module leaves a record of its last run (module_record.py); while it holds
for these args, the module is not started: ok, nothing to change.
"""

from __future__ import annotations

import json
from typing import Any

from fleet.facts import sh_path
from fleet.operations.base import (CHANGED, FAILED, OK, SKIPPED, Context, Outcome, operation, q, reads)
from fleet.operations.module_record import read_command, record_holds

STATUS = {"changed": CHANGED, "unchanged": OK, "skipped": SKIPPED, "error": FAILED}


def last_json_object(text: str) -> dict[str, Any] | None:
    start = text.find("{")
    while start != -1:
        try:
            value = json.loads(text[start:])
            return value if isinstance(value, dict) else None
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
    return None


def outcome_from_answer(answer: dict[str, Any] | None, rc: int, stderr: str) -> Outcome:
    if answer is None:
        return Outcome(FAILED, f"no JSON answer (exit {rc}): {stderr.strip()[-1000:]}")
    if "status" in answer:
        status = STATUS.get(answer["status"], FAILED)
    else:
        status = OK if answer.get("ok") else FAILED
    if rc != 0 and status != FAILED:
        status = FAILED
    message = "; ".join(answer.get("errors") or []) or answer.get("error", "") or answer.get("summary", "") or ""
    if not message and "mcp_server" in answer:  # the Hermes installer: say what it did
        # (a runtime from before the memory provider answers without its two fields)
        message = ", ".join(f"{k}={answer[k]}" for k in ("mcp_server", "seed", "skill", "plugin", "memory_provider")
                            if k in answer)
    return Outcome(status, str(message), diff=answer.get("config_diff") or answer.get("diff") or "", data=answer)


@reads("module", "record")
def record_read(record: str | None = None) -> list[str]:
    return [read_command(record)] if record else []


@operation("module")
def module(ctx: Context, python: str, module: str, args: list[str] | None = None,
           check_args: list[str] | None = None, in_temp_dir: bool = False,
           timeout: float | None = None, verdict_only: bool = False,
           check_python: str | None = None, record: str | None = None) -> Outcome:
    argv = list(args or [])
    if record and record_holds(ctx, record, argv):
        return Outcome(OK, f"{module}: unchanged since its last run (its record holds)")
    if ctx.check:
        if check_args is None:
            return Outcome(SKIPPED, f"{module}: no dry run; not run in check mode")
        if not ctx.run(f"test -x {sh_path(python)}").ok:
            # A new release is not installed in check mode: its dry run is made with the
            # runtime the host has (`check_python`), so the diff is still shown.
            if not check_python or not ctx.run(f"test -x {sh_path(check_python)}").ok:
                return Outcome(CHANGED, f"would run {module} (its runtime is not installed yet)")
            python = check_python
        argv += check_args
    call = f"{sh_path(python)} -m {q(module)} " + " ".join(q(a) for a in argv)
    if in_temp_dir:
        call = f'd=$(mktemp -d) && cd "$d" && {{ {call}; }}; rc=$?; cd / && rm -rf "$d"; exit $rc'
    result = ctx.run(call, timeout=timeout or ctx.timeout)
    outcome = outcome_from_answer(last_json_object(result.stdout), result.rc, result.stderr)
    if verdict_only and outcome.status != FAILED:
        outcome.status, outcome.diff = OK, ""
    return outcome
