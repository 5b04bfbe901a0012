"""Run real Hermes agent sessions against a local model stub (tests/openai_stub.py).

- ``make_stub_home(dir, base_url)``: a throwaway HERMES_HOME, written by Hermes itself
  (``hermes_client.make_hermes_home``), whose config.yaml sends the model to the stub.
- ``chat_once(home, query)``: one non-interactive ``hermes chat -q QUERY -Q`` session.
- ``cron_create`` / ``cron_run``: a cron job made and fired at once (``hermes cron run``
  executes the job in-process in 0.19.0; no gateway or ticker is needed).

Every child runs in its own process group with a hard deadline; on timeout the whole group
is killed and the result says ``timed_out``. The environment is hermes_client's clean one:
only PATH, HOME, HERMES_HOME and friends, with every proxy variable pointing at a dead
loopback port and NO_PROXY covering loopback, so the only place Hermes can talk to is the
stub on 127.0.0.1. Facts behind the config keys and flags: docs/hermes-facts.md, section
"Driving a real Hermes session against a local model stub".
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests import hermes_client

STUB_MODEL = "stub-model"
STUB_API_KEY = "stub-key-not-secret"
DEFAULT_TIMEOUT = 90.0


# --------------------------------------------------------------------------
# The home
# --------------------------------------------------------------------------

def _merge(into: Any, updates: dict) -> None:
    for key, value in updates.items():
        current = into.get(key) if hasattr(into, "get") else None
        if isinstance(value, dict) and hasattr(current, "items"):
            _merge(current, value)
        else:
            into[key] = value


def set_config(home: Path | str, updates: dict) -> None:
    """Deep-merge ``updates`` into <home>/config.yaml (round-trip YAML keeps the rest)."""
    from ruamel.yaml import YAML

    yaml = YAML()
    path = Path(home) / "config.yaml"
    data = yaml.load(path.read_text()) if path.exists() else None
    if data is None:
        data = {}
    _merge(data, updates)
    with path.open("w") as fh:
        yaml.dump(data, fh)


def stub_model_config(base_url: str, *, model: str = STUB_MODEL,
                      context_length: int | None = None) -> dict:
    """The config.yaml keys that point Hermes' main model at an OpenAI-compatible endpoint.

    ``provider: custom`` + ``base_url`` is resolved by hermes_cli/runtime_provider.py to
    ``{"provider": "custom", "api_mode": "chat_completions", "base_url": ...}``; ``default``
    is the model name sent in every request; ``api_key`` is sent as the Bearer token.
    ``context_length`` (optional) overrides what Hermes would learn from GET /v1/models/<id>.
    """
    section: dict = {"default": model, "provider": "custom", "base_url": base_url,
                     "api_key": STUB_API_KEY}
    if context_length is not None:
        section["context_length"] = context_length
    return {"model": section}


# Quiet defaults for a test home: nothing Hermes would try to download or probe.
TEST_HOME_CONFIG: dict = {
    # tirith is a pre-exec command scanner Hermes would download from GitHub releases
    # into $HERMES_HOME/bin (tools/tirith_security.py); off, it neither tries nor warns.
    "security": {"tirith_enabled": False},
}


def make_stub_home(directory: Path | str, base_url: str, *, model: str = STUB_MODEL,
                   context_length: int | None = None, extra_config: dict | None = None) -> Path:
    """A fresh Hermes home (made by `hermes setup`) whose model is the stub at base_url."""
    home = hermes_client.make_hermes_home(directory)
    set_config(home, TEST_HOME_CONFIG)
    set_config(home, stub_model_config(base_url, model=model, context_length=context_length))
    if extra_config:
        set_config(home, extra_config)
    return home


# --------------------------------------------------------------------------
# Running Hermes with a deadline
# --------------------------------------------------------------------------

@dataclass
class HermesRun:
    argv: list[str]
    returncode: int | None  # None when killed on timeout
    stdout: str
    stderr: str
    duration: float
    timed_out: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    @property
    def session_id(self) -> str | None:
        """`hermes chat -q -Q` prints `session_id: <id>` on stderr as its last line."""
        found = re.findall(r"^session_id: (\S+)\s*$", self.stderr, re.M)
        return found[-1] if found else None

    def describe(self) -> str:
        state = "TIMED OUT" if self.timed_out else f"exit {self.returncode}"
        return (f"{' '.join(self.argv)} -> {state} after {self.duration:.1f}s\n"
                f"--- stdout\n{self.stdout[-3000:]}\n--- stderr\n{self.stderr[-3000:]}")


def default_workdir(home: Path) -> Path:
    """An empty directory beside the home: the session's cwd.

    Hermes reads project context (AGENTS.md, pyproject.toml, git state...) from its cwd
    into the system prompt; running from our repo would leak it into every request.
    """
    workdir = Path(home).parent / f"{Path(home).name}-cwd"
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir


def run_bounded(home: Path | str, *args: str, timeout: float = DEFAULT_TIMEOUT,
                cwd: Path | str | None = None, extra_env: dict[str, str] | None = None) -> HermesRun:
    """`hermes ARGS` in a new process group, stdin closed, killed as a group at the deadline."""
    home = Path(home)
    hermes = hermes_client.ensure_hermes_venv()
    argv = [str(hermes), *args]
    env = hermes_client.hermes_env(home, extra_env=extra_env)
    started = time.monotonic()
    proc = subprocess.Popen(argv, env=env, cwd=str(cwd or default_workdir(home)),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            stdout, stderr = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            # Something outside the group (it called setsid) still holds our pipes.
            proc.kill()
            proc.wait(timeout=10)
            stdout, stderr = "", "(output lost: a process outside the group held the pipes)"
    finally:
        # Leftovers of the group (a stdio server, a tool's child) never outlive the run.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return HermesRun(["hermes", *args], None if timed_out else proc.returncode,
                     stdout or "", stderr or "", time.monotonic() - started, timed_out)


def chat_once(home: Path | str, query: str, *, timeout: float = DEFAULT_TIMEOUT, quiet: bool = True,
              extra_args: tuple[str, ...] = (), cwd: Path | str | None = None,
              extra_env: dict[str, str] | None = None) -> HermesRun:
    """One non-interactive session: `hermes chat -q QUERY [-Q]`.

    ``-q`` runs a single turn and exits (cli.py main(): "Handle single query mode"), then
    cleans up through _finalize_single_query -> _run_cleanup, which ends the memory
    provider (on_session_end + shutdown). ``-Q`` skips the banner and spinner and prints
    only the final response on stdout and ``session_id: <id>`` on stderr.
    """
    args = ["chat", "-q", query, *(["-Q"] if quiet else []), *extra_args]
    return run_bounded(home, *args, timeout=timeout, cwd=cwd, extra_env=extra_env)


# --------------------------------------------------------------------------
# Cron
# --------------------------------------------------------------------------

_CREATED = re.compile(r"Created job: (\S+)")


def cron_create(home: Path | str, prompt: str, *, schedule: str = "every 1h",
                name: str | None = None, timeout: float = 60) -> str:
    """`hermes cron create SCHEDULE PROMPT`; returns the job id."""
    args = ["cron", "create", schedule, prompt, *(["--name", name] if name else [])]
    run = run_bounded(home, *args, timeout=timeout)
    found = _CREATED.search(run.output)
    if not found:
        raise RuntimeError(f"cron create printed no job id:\n{run.describe()}")
    return found.group(1)


def cron_run(home: Path | str, job_id: str, *, timeout: float = DEFAULT_TIMEOUT) -> HermesRun:
    """`hermes cron run ID`: in 0.19.0 this fires the job now, in this process
    (tools/cronjob_tools.py _execute_job_now -> cron.scheduler.run_one_job), and prints
    `Ran now: succeeded.` or `Ran now: failed.`"""
    run = run_bounded(home, "cron", "run", job_id, timeout=timeout)
    found = re.search(r"Ran now: (succeeded|failed)", run.output)
    run.extra["outcome"] = found.group(1) if found else None
    return run
