"""What verification reads on a host, as named shell probes, and their results.

Checks used to ask testinfra one question at a time (`host.file(p).is_file`, `.mode`,
`.content_string`, `host.run(...)`): about 15 round trips per host (over 20 with --hermes), made
one after another as pytest ran the checks (at 20 ms of network latency, 0.3 s a host).
Now the cheap reads of a host are one batch (`fact_commands`, one command, one round trip), gathered for every
host at once in the session pool (sessions.py); the slow or hang-prone commands (the MCP
self-check, Hermes' own client, the gateway's service manager) run after it, each on its own
channel with its own deadline (`followup_commands`), so one that hangs fails its check, not the
host. The checks (host_checks.py) only read the results.
"""

from __future__ import annotations

import json
import posixpath
import shlex
from dataclasses import dataclass

from fleet.facts import file_reading_command
from fleet.operations.directory import stat_mode_command

from .target import HostLayout, VerifyTarget


@dataclass(frozen=True)
class Probe:
    """One probe's outcome: exit status, output and error output (a batch probe's is dropped)."""

    rc: int
    out: str
    err: str = ""

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def last_line(self) -> str:
        """The error output's last line, else the output's: what a failure message quotes."""
        for text in (self.err, self.out):
            lines = [line for line in text.strip().splitlines() if line.strip()]
            if lines:
                return lines[-1]
        return "(no output)"


def fact_commands(layout: HostLayout) -> dict[str, str]:
    """The cheap reads every check needs, by name; run together as one batch."""
    q = shlex.quote
    soul = q(layout.soul_file)
    return {
        "system": "uname -s",
        "uid": "id -u",
        "user": "id -un",
        "current_link": f"readlink -- {q(layout.current)}",
        "current_is_dir": f"test -d {q(layout.current)}",  # follows the link
        "imports": f"{q(layout.current_python)} -c 'import soulgraph' 2>&1",
        "config": f"cat -- {q(layout.config)}",
        "plugin_init": f"test -f {q(posixpath.join(layout.plugin, '__init__.py'))}",
        "plugin_settings": f"cat -- {q(posixpath.join(layout.plugin, 'settings.json'))}",
        "soul_mode": f"test -f {soul} && {{ {stat_mode_command(soul)}; }}",  # octal permission bits
        "skill": f"test -f {q(layout.skill)}",
        "soul_state": f"cat -- {q(layout.soul_state)}",
        "hermes_command": "command -v hermes",
        **self_check_fact_commands(layout),
        **hermes_check_fact_commands(layout),
        # With soul_embed: can the runtime embed (numpy and the model package)? "True", or why
        # not. Imports no numpy; other hosts are spared the Python start.
        **({"vectors": f"{q(layout.current_python)} -c 'from soulgraph.engine import embeddings as e; "
                       f"print(e.available() or e.unavailable_reason())' 2>&1"} if layout.embed else {}),
    }


# -- the MCP self-check's record ------------------------------------------------------------------
# The self-check starts the host's MCP server and the SDK's client: two Pythons importing the
# MCP SDK, about 3 s of CPU, which is nearly all of a verification's cost (20 lab hosts sharing
# two cores: ~29 s). Its answer depends only on the runtime `current` points at (its venv and
# the interpreter under it), the soul file and the toolsets; so a passed self-check is recorded
# on the host, under the runtime folder (the one file verify writes), with what it depended on,
# and the next verification reuses it while none of that has changed. `--full` runs it anyway.

SELF_CHECK_RECORD = "self-check.json"


def self_check_record_path(layout: HostLayout) -> str:
    return posixpath.join(layout.runtime_dir, SELF_CHECK_RECORD)


QUOTED_F = '"$f"'  # the loop variable, quoted for the shell


def self_check_fact_commands(layout: HostLayout) -> dict[str, str]:
    q = shlex.quote
    record = q(self_check_record_path(layout))
    files = " ".join(q(p) for p in (layout.current_python, layout.soul_file))
    return {
        # What the answer depends on: the release, and the interpreter's and the soul file's
        # inode, size, mtime, mode and owner (the soul file is replaced, new inode, on every save).
        "self_check_inputs": f"readlink -- {q(layout.current)}; for f in {files}; do "
                             f"{file_reading_command(QUOTED_F)}; done",
        "self_check_record": f"cat -- {record}",
        # Anything in the venv changed since the record was written (a package removed, a file edited).
        "venv_changed_since_record": f"test -f {record} && find {q(layout.current + '/venv/')} -newer {record} -print -quit",
    }


def self_check_key(facts: "HostFacts") -> str:
    return f"{facts.layout.toolsets}\n{facts['self_check_inputs'].out.strip()}"


def recorded_self_check(facts: "HostFacts") -> tuple[Probe, str] | None:
    """The recorded self-check answer and when it was recorded, when it still holds (else None:
    run it again)."""
    record, changed = facts["self_check_record"], facts["venv_changed_since_record"]
    if not record.ok or not facts["self_check_inputs"].ok or changed.out.strip():
        return None
    try:
        data = json.loads(record.out)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("key") != self_check_key(facts) or not isinstance(data.get("report"), dict):
        return None
    return Probe(0, json.dumps(data["report"])), str(data.get("recorded_at") or "an earlier run")


def self_check_record(facts: "HostFacts", report: dict, recorded_at: str) -> bytes:
    """The record of a passed self-check, for self_check_record_path."""
    return json.dumps({"key": self_check_key(facts), "recorded_at": recorded_at, "report": report}).encode()


# -- Hermes' own client checks' record ------------------------------------------------------------
# `hermes mcp test soul` and `hermes memory status` start Hermes (its CLI imports most of the
# agent: several seconds of CPU a host) and, the first, our MCP server under it. Their answers
# depend on the release `current` points at, Hermes' config.yaml (the entry, the memory provider),
# the plugin's files and the Hermes install itself (its `hermes` command, rewritten when Hermes is
# upgraded); so, as the self-check's, passed answers are recorded with those readings and reused
# while none of them changed. `--full` runs them anyway.

HERMES_CHECK_RECORD = "hermes-check.json"
HERMES_CLIENT_PROBES = ("hermes_mcp_test", "hermes_memory_status")


def hermes_check_record_path(layout: HostLayout) -> str:
    return posixpath.join(layout.runtime_dir, HERMES_CHECK_RECORD)


def hermes_check_fact_commands(layout: HostLayout) -> dict[str, str]:
    q = shlex.quote
    record = q(hermes_check_record_path(layout))
    files = " ".join(q(p) for p in (layout.current_python, layout.config, posixpath.join(layout.plugin, "__init__.py"),
                                    posixpath.join(layout.plugin, "settings.json")))
    return {
        "hermes_check_inputs": f"readlink -- {q(layout.current)}; for f in {files} \"$(command -v hermes)\"; do "
                               f"{file_reading_command(QUOTED_F)}; done",
        "hermes_check_record": f"cat -- {record}",
        "venv_changed_since_hermes_record": f"test -f {record} && find {q(layout.current + '/venv/')} -newer {record} "
                                            "-print -quit",
    }


def hermes_check_key(facts: "HostFacts") -> str:
    return f"{facts.layout.toolsets}\n{facts.layout.hermes_home}\n{facts['hermes_check_inputs'].out.strip()}"


def recorded_hermes_check(facts: "HostFacts") -> tuple[dict[str, Probe], str] | None:
    """Hermes' client answers recorded by an earlier verification and when, when they still
    hold (else None: run them again)."""
    record, changed = facts["hermes_check_record"], facts["venv_changed_since_hermes_record"]
    if not record.ok or not facts["hermes_check_inputs"].ok or changed.out.strip():
        return None
    try:
        data = json.loads(record.out)
    except ValueError:
        return None
    answers = data.get("answers") if isinstance(data, dict) else None
    if data.get("key") != hermes_check_key(facts) or not isinstance(answers, dict) \
            or set(answers) != set(HERMES_CLIENT_PROBES):
        return None
    try:
        probes = {name: Probe(0, str(answer["out"]), str(answer.get("err", ""))) for name, answer in answers.items()}
    except (TypeError, KeyError):
        return None
    return probes, str(data.get("recorded_at") or "an earlier run")


def hermes_check_record(facts: "HostFacts", answers: dict[str, Probe], recorded_at: str) -> bytes:
    """The record of Hermes' client answers (both exited 0), for hermes_check_record_path."""
    return json.dumps({"key": hermes_check_key(facts), "recorded_at": recorded_at,
                       "answers": {name: {"out": p.out, "err": p.err} for name, p in answers.items()}}).encode()


@dataclass(frozen=True)
class HostFacts:
    """The batch's results, with the readings checks share."""

    probes: dict[str, Probe]
    layout: HostLayout

    def __getitem__(self, name: str) -> Probe:
        return self.probes[name]

    @property
    def system(self) -> str:
        return self["system"].out.strip()

    @property
    def deployed_release(self) -> str | None:
        """Where `current` points, as an absolute path; None when it is not a symlink."""
        link = self["current_link"]
        if not link.ok:
            return None
        return posixpath.normpath(posixpath.join(self.layout.runtime_dir, link.out.strip()))

    @property
    def soul_state(self) -> dict | None:
        """What `soulrepo import` recorded; None when no layered soul was imported, {} when
        the file is not a JSON object."""
        state = self["soul_state"]
        if not state.ok:
            return None
        try:
            data = json.loads(state.out)
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    def imported_skill_files(self) -> list[str]:
        """The skill files the import wrote, relative to the Hermes home."""
        skills = (self.soul_state or {}).get("skills")
        if not isinstance(skills, dict):
            return []
        return [posixpath.join(skill, name) for skill, files in skills.items()
                if isinstance(files, (dict, list)) for name in files]


def followup_commands(target: VerifyTarget, layout: HostLayout, facts: HostFacts,
                      hermes: bool, self_check: bool = True, hermes_client: bool = True) -> dict[str, str]:
    """The commands run one by one after the batch, each with its own deadline: what is slow
    (the MCP self-check, Hermes' CLI), may hang (a service manager), or depends on the facts.
    A probe a check finds missing means "not applicable here" (the check says why).
    `self_check=False`: its record still holds (recorded_self_check); `hermes_client=False`: so
    does the record of Hermes' client checks (recorded_hermes_check)."""
    q = shlex.quote
    commands = {}
    if self_check:
        commands["self_check"] = " ".join(q(a) for a in [
            layout.current_python, "-m", "soulgraph.check", "--soul-file", layout.soul_file, *layout.toolset_args])
    files = facts.imported_skill_files()
    if files:
        paths = " ".join(q(posixpath.join(layout.hermes_home, f)) for f in files)
        commands["skill_files"] = f'for f in {paths}; do [ -f "$f" ] || printf "%s\\n" "$f"; done'
    if not hermes:
        return commands
    gateway = gateway_command(target, layout, facts)
    if gateway:
        commands["gateway"] = gateway
    if facts.system != "Darwin" and not (target.gateway or {}).get("gateway_restart_command"):
        commands["lingering"] = f"loginctl show-user {q(facts['user'].out.strip())} -p Linger"
    if facts["hermes_command"].ok and hermes_client:
        home = q(layout.hermes_home)
        commands["hermes_mcp_test"] = f"env HERMES_HOME={home} hermes mcp test soul"
        commands["hermes_memory_status"] = f"env HERMES_HOME={home} hermes memory status"
    return commands


def gateway_command(target: VerifyTarget, layout: HostLayout, facts: HostFacts) -> str | None:
    """Whether the gateway runs: launchd on macOS (the GUI domain, then the user domain, as
    there is no GUI session over SSH), else the inventory's status command or systemd's."""
    from fleet.operations.service import status_command

    gateway = target.gateway or {}
    if facts.system == "Darwin" and not gateway.get("gateway_status_command"):
        uid = facts["uid"].out.strip()
        return " || ".join(f"launchctl print {shlex.quote(f'{domain}/{layout.gateway_label}')}"
                           for domain in (f"gui/{uid}", f"user/{uid}"))
    return status_command(gateway, "linux", "", layout.gateway_unit, layout.gateway_label)
