"""prune_releases: keep the newest few release folders, never the active or protected ones."""

from __future__ import annotations

from fleet.facts import sh_path
from fleet.operations.base import CHANGED, OK, Context, Outcome, failed_result, operation, q, reads


@reads("prune_releases", "path")
def listing_command(path: str) -> list[str]:
    # Newest first by modification time; `ls -t` behaves the same on GNU and BSD.
    return [f"cd {sh_path(path)} 2>/dev/null && ls -1t"]


@operation("prune_releases")
def prune_releases(ctx: Context, path: str, keep: int = 3, protect: list[str] | None = None) -> Outcome:
    keep = int(keep)
    listing = ctx.read(listing_command(path)[0]).stdout.split()
    keep_names = set(p for p in (protect or []) if p)
    old = [name for name in listing if name not in keep_names][max(0, keep - len(keep_names)):]
    if not old:
        return Outcome(OK)
    if ctx.check:
        return Outcome(CHANGED, "would remove " + ", ".join(old))
    result = ctx.run(f"cd {sh_path(path)} && rm -rf " + " ".join(q(n) for n in old))
    return Outcome(CHANGED, "removed " + ", ".join(old)) if result.ok else failed_result(result, "prune")
