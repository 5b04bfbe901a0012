"""The generated samples of the reference pages (docs/reference/): every command's `--help`,
every MCP tool's schemas, the configuration keys and the files on disk, each made by running
the code. `scripts/doc_samples.py` registers `SAMPLES` from here; tests/test_doc_samples.py
checks each marked block, and tests/test_doc_reference.py that the pages miss no command.
"""

from __future__ import annotations

import re
from typing import Callable

# ----------------------------------------------------------------------------- commands.md
# (sample name, the command as the page shows it). The name is "help-" and the words of the
# command after its program; every one is run with --help.
COMMANDS: list[tuple[str, str]] = [
    ("help-mcp", "python -m soulgraph.mcp"),
    ("help-check", "python -m soulgraph.check"),
    ("help-install", "python -m soulgraph.install"),
    ("help-seed", "python -m soulgraph.seed"),
    ("help-memory-service", "python -m soulgraph.hermes.memory_service"),
    ("help-memories", "python -m soulgraph.memories"),
    *[(f"help-memories-{sub}", f"python -m soulgraph.memories {sub}") for sub in (
        "list", "search", "show", "history", "edit", "pin", "unpin", "archive", "unarchive", "forget", "users",
        "share", "forget-user", "flagged", "release", "consolidate")],
    ("help-store", "python -m soulgraph.store"),
    *[(f"help-store-{sub}", f"python -m soulgraph.store {sub}") for sub in (
        "check", "compact", "export", "backup", "restore", "repair")],
    ("help-soulrepo", "python -m soulgraph.soulrepo"),
    *[(f"help-soulrepo-{sub}", f"python -m soulgraph.soulrepo {sub}") for sub in (
        "validate", "export", "import", "bundle")],
    ("help-eval", "python -m soulgraph.eval"),
    *[(f"help-eval-{sub}", f"python -m soulgraph.eval {sub}") for sub in (
        "ledger", "locomo", "supersede", "provider", "updates", "synth")],
    ("help-fleet-update-command", "fleet-update"),
    ("help-fleet", "fleet"),
    *[(f"help-fleet-{sub}", f"fleet {sub}") for sub in (
        "update", "bootstrap", "status", "verify", "backup", "restore", "memories", "soul")],
    ("help-fleet-soul-collect", "fleet soul collect"),
]

HELP_COLUMNS = "80"  # the width argparse and click wrap help to, as in a terminal


def _help(command: str) -> Callable:
    def sample(session) -> str:
        session.env["COLUMNS"] = HELP_COLUMNS
        session.run(f"{command} --help")
        return session.text()
    sample.__doc__ = f"docs/reference/commands.md: `{command} --help`."
    return sample


def subcommands(help_text: str) -> list[str]:
    """The subcommands a `--help` lists: argparse's, indented four spaces under the choices in
    "positional arguments:", or click's "Commands:" section."""
    found: list[str] = []
    section = None
    for line in help_text.splitlines():
        if line in ("positional arguments:", "Commands:"):
            section = line
            continue
        if section is None:
            continue
        if not line.strip():
            if found:
                break
            continue
        if not line.startswith(" "):
            section = None
            continue
        pattern = r"^    ([a-z][\w-]*)(\s|$)" if section == "positional arguments:" else r"^  ([a-z][\w-]*)(\s|$)"
        m = re.match(pattern, line)
        if m:
            found.append(m.group(1))
    return found


SAMPLES: dict[str, Callable] = {name: _help(command) for name, command in COMMANDS}
