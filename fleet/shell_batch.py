"""Many shell commands in one round trip, each answer framed apart: its output and exit status.

Used where a run would otherwise ask a host one question per round trip: fleet-update's reads
ahead of its tasks (fleet/operations/base.py, Context.read_ahead) and verify's reads of a host
(fleet/verify/probes.py). Each command runs in a subshell of its own, so an `exit` or a `cd` in
one does not reach the next; its error output is dropped unless the command merges it.
"""

from __future__ import annotations

import re
import secrets


def new_nonce() -> str:
    """A marker no file content holds by chance."""
    return "sfb" + secrets.token_hex(6)


def batch_command(commands: dict[str, str], nonce: str) -> str:
    """`commands` by name (letters, digits, _); the answer goes to parse_batch."""
    parts = []
    for name, command in commands.items():
        parts.append(f"printf '%s\\n' '::{nonce}:{name}::'; ( {command}\n) 2>/dev/null; "
                     f"printf '\\n::{nonce}:rc:: %s\\n' \"$?\"")
    return "; ".join(parts)


def parse_batch(output: str, nonce: str, names) -> dict[str, tuple[int, str]]:
    """(exit status, output) by name; raises when the shell did not answer every command."""
    found = {m.group(1): (int(m.group(3)), m.group(2)) for m in re.finditer(
        rf"::{nonce}:(\w+)::\n(.*?)\n::{nonce}:rc:: (\d+)\n", output, re.S)}
    missing = [name for name in names if name not in found]
    if missing:
        raise RuntimeError(f"the host's shell did not answer every command (missing: {', '.join(missing)})")
    return found
