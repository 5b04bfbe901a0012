"""symlink: a link points at a target, switched atomically.

The new link is made beside the old one and renamed over it (rename(2) is atomic), so a reader
sees the old target or the new one, never a missing link. The host's Python does the rename:
`mv` onto a link to a folder would move into the folder, and GNU/BSD flags differ.
"""

from __future__ import annotations

from fleet.facts import sh_path
from fleet.operations.base import CHANGED, OK, Context, Outcome, failed_result, operation, q, reads

SWITCH = ("import os, sys; link, target = sys.argv[1:3]; tmp = link + '.new'; "
          "os.path.lexists(tmp) and os.unlink(tmp); os.symlink(target, tmp); os.replace(tmp, link)")


@reads("symlink", "path")
def readlink_command(path: str) -> list[str]:
    return [f"readlink {sh_path(path)} || true"]


@operation("symlink")
def symlink(ctx: Context, path: str, target: str, python: str = "/usr/bin/python3") -> Outcome:
    current = ctx.read(readlink_command(path)[0]).stdout.strip()
    if current == target:
        return Outcome(OK, f"{path} -> {target}")
    message = f"{path} -> {target}" + (f" (was {current})" if current else "")
    if ctx.check:
        return Outcome(CHANGED, "would switch " + message)
    result = ctx.run(f"{sh_path(python)} -c {q(SWITCH)} {sh_path(path)} {q(target)}")
    return Outcome(CHANGED, "switched " + message) if result.ok else failed_result(result, "switch")
