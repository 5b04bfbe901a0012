"""The reference pages (docs/reference/) miss nothing: every runnable module and every
subcommand has its `--help` block in commands.md (scripts/doc_reference.py lists them; whether
each block is what the command prints now is tests/test_doc_samples.py's)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import doc_reference  # noqa: E402

BIN = Path(sys.executable).parent
SHOWN = dict(doc_reference.COMMANDS)  # name -> command
COMMANDS = set(SHOWN.values())
# Modules runnable with -m that a page names by another module that runs the same main().
SAME_AS = {"soulgraph.hermes.install": "soulgraph.install", "soulgraph.hermes.seed": "soulgraph.seed",
           "soulgraph.server.app": "soulgraph.mcp"}


def _help(command: str) -> str:
    words = command.split()
    if words[0] == "python":
        argv = [sys.executable, *words[1:]]
    else:
        argv = [str(BIN / words[0]), *words[1:]]
    proc = subprocess.run([*argv, "--help"], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, COLUMNS=doc_reference.HELP_COLUMNS), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_every_runnable_module_has_its_help_shown():
    runnable = set()
    for path in (ROOT / "runtime" / "soulgraph").rglob("*.py"):
        if re.search(r'^if __name__ == "__main__":', path.read_text(encoding="utf-8"), re.M):
            module = ".".join(path.relative_to(ROOT / "runtime").with_suffix("").parts)
            module = module.removesuffix(".__main__")
            runnable.add(SAME_AS.get(module, module))
    shown = {command.split()[2] for command in COMMANDS if command.startswith("python -m ")}
    assert sorted(runnable - shown) == []


def test_every_console_script_has_its_help_shown():
    scripts = re.findall(r'^([\w-]+) = "fleet\.cli:', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    assert scripts and sorted(set(scripts) - COMMANDS) == []


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_subcommand_has_its_help_shown(command):
    listed = doc_reference.subcommands(_help(command))
    assert sorted(f"{command} {sub}" for sub in listed if f"{command} {sub}" not in COMMANDS) == []


def test_the_subcommands_are_read_from_argparse_and_click_help():
    argparse_help = ("usage: x [-h] {a,b} ...\n\npositional arguments:\n  {a,b}\n    a     does a\n"
                     "    b-c   does b,\n                wrapped\n\noptions:\n  -h, --help  help\n\n    epilog line\n")
    assert doc_reference.subcommands(argparse_help) == ["a", "b-c"]
    click_help = "Usage: x [OPTIONS] COMMAND\n\nOptions:\n  --help  Show this.\n\nCommands:\n  one  First.\n  two  Second.\n"
    assert doc_reference.subcommands(click_help) == ["one", "two"]
