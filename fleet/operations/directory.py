"""directory: a folder exists with the given mode (parents made as needed)."""

from __future__ import annotations

from fleet.facts import sh_path
from fleet.operations.base import (CHANGED, OK, Context, Outcome, failed_result, operation,
                                   parse_mode, reads)


def stat_mode_command(path: str) -> str:
    # GNU stat first, then BSD stat (macOS); prints nothing when the path is absent.
    return f"stat -c %a {path} 2>/dev/null || stat -f %Lp {path} 2>/dev/null || true"


@reads("directory", "path")
def state_command(path: str) -> list[str]:
    p = sh_path(path)
    return [f"if [ -d {p} ]; then echo dir; {stat_mode_command(p)}; "
            f"elif [ -e {p} ]; then echo other; else echo absent; fi"]


@operation("directory")
def directory(ctx: Context, path: str, mode=None) -> Outcome:
    want = parse_mode(mode)
    p = sh_path(path)
    state = ctx.read(state_command(path)[0]).stdout.split()
    kind = state[0] if state else "absent"
    if kind == "other":
        return Outcome("failed", f"{path} exists and is not a directory")
    todo = []
    if kind == "absent":
        todo.append(f"mkdir -p {p}")
    if want is not None and (kind == "absent" or int(state[1], 8) != want):
        todo.append(f"chmod {want:o} {p}")
    if not todo:
        return Outcome(OK)
    message = ("create " if kind == "absent" else "set mode of ") + path
    if ctx.check:
        return Outcome(CHANGED, "would " + message)
    result = ctx.run(" && ".join(todo))
    return Outcome(CHANGED, message) if result.ok else failed_result(result, "mkdir/chmod")
