"""soul_import: the layered soul's tree at one commit, shipped to the host and imported there.

The tree (a tar archive made on the operator by fleet/soul.py, validated there) is unpacked
into `dest` (`<runtime_dir>/souls/<commit>`), complete only once its marker file is written,
so an interrupted transfer is redone, never used. Then the runtime's own
`python -m soulgraph.soulrepo import` runs on it with the commit and origin for provenance;
its JSON report is the outcome (unchanged → ok). Trees of other commits are removed after a
successful import: the tree is the import's source, not a clone, and holds no credentials.

Check mode: the tree goes to a temporary folder (removed afterwards) and the import runs with
`--check`, so the diff shown is the one this host would get; nothing in the home changes.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

from fleet.facts import sh_path
from fleet.operations.base import CHANGED, FAILED, Context, Outcome, failed_result, operation, q
from fleet.operations.module import last_json_object, outcome_from_answer

MARKER = ".soulfleet-complete"


def _unpack(dest: str) -> str:
    d, tmp = sh_path(dest), sh_path(dest + ".partial")
    return f"rm -rf {tmp} && mkdir -p {tmp} && tar -xf - -C {tmp} && touch {tmp}/{MARKER} && rm -rf {d} && mv {tmp} {d}"


@operation("soul_import")
def soul_import(ctx: Context, python: str, archive: str, dest: str, hermes_home: str, commit: str,
                origin: str) -> Outcome:
    data = Path(archive).read_bytes()
    tail = ["--hermes-home", hermes_home, "--commit", commit, "--origin", origin]
    if ctx.check:
        if not ctx.run(f"test -x {sh_path(python)}").ok:
            return Outcome(CHANGED, f"would ship the soul at {commit[:12]} and import it (the runtime is not installed yet)")
        call = (f'd=$(mktemp -d) && tar -xf - -C "$d" && {sh_path(python)} -m soulgraph.soulrepo import "$d" '
                + " ".join(q(a) for a in tail) + ' --check; rc=$?; rm -rf "$d"; exit $rc')
        result = ctx.run(call, input=data)
        return outcome_from_answer(last_json_object(result.stdout), result.rc, result.stderr)
    shipped = False
    if not ctx.run(f"test -f {sh_path(dest)}/{MARKER}").ok:
        result = ctx.run(_unpack(dest), input=data)
        if not result.ok:
            return failed_result(result, "unpacking the soul tree")
        shipped = True
    result = ctx.run(f"{sh_path(python)} -m soulgraph.soulrepo import {sh_path(dest)} " + " ".join(q(a) for a in tail))
    outcome = outcome_from_answer(last_json_object(result.stdout), result.rc, result.stderr)
    if outcome.status == FAILED:
        return outcome
    souls = sh_path(posixpath.dirname(dest.rstrip("/")))
    keep = q(posixpath.basename(dest.rstrip("/")))
    ctx.run(f'for old in {souls}/*; do [ "$(basename "$old")" = {keep} ] || rm -rf "$old"; done')
    if shipped and outcome.status != CHANGED:
        outcome.status = CHANGED
        outcome.message = f"shipped the soul tree at {commit[:12]}; " + outcome.message
    return outcome
