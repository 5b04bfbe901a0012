"""find_hermes: which Hermes the host has, so the gateway's service runs that one.

Looked for, in order: the inventory's `hermes_python` (must exist); the `hermes` command on the
login PATH (its shebang names its Python); pipx's venv (`~/.local/pipx/venvs/hermes-agent`),
uv's tool venv (`~/.local/share/uv/tools/hermes-agent`); Hermes' own installer's venv
(`<root>/hermes-agent/venv`). The Python found becomes the variable `hermes_python` for the
templates after it (a fact learnt by a task). None: the host fails here, before anything is
written, saying where it looked.

It also says whether a gateway definition is already there that we did not write (Hermes'
own `hermes gateway install` unit or plist): `gateway_definition_theirs`, so bootstrap uses it
as it is and never overwrites it.
"""

from __future__ import annotations

from fleet.facts import sh_path
from fleet.operations.base import FAILED, OK, Context, Outcome, operation

OUR_MARK = "Written by `fleet bootstrap` (soulfleet)"
CANDIDATES = ("$HOME/.local/pipx/venvs/hermes-agent/bin/python", "$HOME/.local/share/uv/tools/hermes-agent/bin/python")


@operation("find_hermes")
def find_hermes(ctx: Context, hermes_home: str, definition: str, hermes_python: str = "") -> Outcome:
    own = f"{sh_path(hermes_home)}/hermes-agent/venv/bin/python"
    script = "; ".join([
        'h=$(command -v hermes 2>/dev/null)',
        'if [ -n "$h" ]; then l=$(head -n 1 "$h" | sed -n "s/^#!//p"); set -- $l; '
        '[ -n "$1" ] && [ -x "$1" ] && [ "$(basename "$1")" != env ] && echo "path:$1"; fi',
        *(f'[ -x "{c}" ] && echo "pipx-or-uv:{c}"' for c in CANDIDATES),
        f'[ -x {own} ] && echo "installer:$(cd "$(dirname {own})" && pwd)/python"',
        f'if [ -f {sh_path(definition)} ]; then grep -q {sh_path(OUR_MARK)} {sh_path(definition)} '
        '&& echo "definition:ours" || echo "definition:theirs"; fi',
        'true',
    ])
    found = ctx.run(script)
    lines = [line for line in found.stdout.splitlines() if ":" in line]
    theirs = "definition:theirs" in lines
    ctx.vars["gateway_definition_theirs"] = theirs
    if hermes_python:
        if not ctx.run(f"test -x {sh_path(hermes_python)}").ok:
            return Outcome(FAILED, f"hermes_python {hermes_python} (from the inventory) is not an executable here")
        python, how = hermes_python, "the inventory's hermes_python"
    else:
        hits = [line.split(":", 1) for line in lines if not line.startswith("definition:")]
        if not hits:
            return Outcome(FAILED, "no Hermes installation found here: looked for `hermes` on the PATH, pipx's and "
                                   "uv's hermes-agent venvs and <hermes home>/hermes-agent/venv; install Hermes first, "
                                   "or set hermes_python in the inventory")
        how, python = hits[0]
        how = {"path": "the hermes command on the PATH", "pipx-or-uv": "its pipx/uv venv",
               "installer": "Hermes' own installer's venv"}[how]
    ctx.vars["hermes_python"] = python
    note = "; Hermes' own gateway definition is in place: used as it is" if theirs else ""
    return Outcome(OK, f"Hermes runs with {python} ({how}){note}", data={"python": python, "theirs": theirs})
