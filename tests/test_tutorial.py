"""docs/tutorial.md, run as written, and docs/troubleshooting.md kept in step with the code.

The tutorial's commands sit in fenced blocks marked `<!-- tutorial: local -->` and
`<!-- tutorial: fleet -->`; its inventory in one marked `<!-- tutorial: inventory -->`. Each
block's commands run in one bash process (so `source .venv/bin/activate` holds for the commands
after it, as in the reader's terminal), from a fresh clone of this repository, with a deadline.

What stands in for the reader's machine:

- the reader's clone: `git clone` of this repository's HEAD into a temporary folder (only
  committed files), whose `.venv` is made by `scripts/ensure-venv`, the step `./run-local`
  starts with;
- the reader's home: a temporary folder as HOME, with a Hermes home at `~/.hermes` made by
  `hermes setup` (the prerequisite the tutorial names); `hermes` on PATH is the test suite's
  Hermes venv. The runtime's build cache is the developer's own (SOULFLEET_CACHE, else
  ~/.cache/soulfleet), as the README's run-local sample uses it, so a built release is reused;
- the reader's two hosts (part 2): two hosts of the SSH lab (tests/lab.py). The tutorial's
  inventory.yml is written into the clone with its groups, names and vars kept; each host's
  connection facts (address, port, user, key) and `known_hosts` are replaced by the lab host's,
  and `gateway_restart_command` is added because lab hosts have no systemd user manager. The
  host names (worker-1, worker-2) stay as the tutorial spells them, so the commands run
  verbatim: worker-1 is lab.hosts[0], worker-2 lab.hosts[1].
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests import hermes_client
from tests.fleet_helpers import reset_to_bare_hermes

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
TUTORIAL = DOCS / "tutorial.md"
TROUBLESHOOTING = DOCS / "troubleshooting.md"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
LOCAL_TIMEOUT = 1200  # seconds, part 1 (a first ./run-local may build the runtime's wheelhouse)
FLEET_TIMEOUT = 900  # seconds, part 2
RESTART = 'echo restart >> "$HOME/gateway-restarts"'  # the lab hosts' gateway restart
MARK = "@@tutorial"

# What each command of the tutorial must print (it must also exit 0). Keyed by how the command
# starts; a command the page shows that is not here must still exit 0, and every key here must
# name a command of the page, so a command taken out of the page is noticed.
ADDED = "Deploys of project atlas go out on Tuesdays, after the 10:00 stand-up"
LOCAL_EXPECT = {
    "./run-local": ['"tool_count": 13', '"ok": true', "run-local: done in"],
    "hermes mcp test soul": ["✓ Connected", "Tools discovered: 13"],
    "~/.soulfleet/current/venv/bin/python - <<": ["remembered as n"],
    "~/.soulfleet/current/venv/bin/python -m soulgraph.memories search": [ADDED],
    "~/.soulfleet/current/venv/bin/python -m soulgraph.memories list": [ADDED],
}
FLEET_EXPECT = {
    "source .venv/bin/activate": [],
    "fleet-update --hermes --yes -i inventory.yml all HEAD": ["worker-1", "worker-2", "SECONDS"],
    "fleet verify -i inventory.yml all": ["2/2 hosts passed every check"],
    "fleet status -i inventory.yml": ["worker-1: linux sha=", "worker-2: linux sha="],
    "fleet backup --yes -i inventory.yml": ["worker-1: backed up ", "worker-2: backed up "],
    "fleet memories -i inventory.yml worker-1 list": [],
}


# -- the page's blocks ---------------------------------------------------------------------------

def block(name: str, page: Path = TUTORIAL) -> str:
    """The fenced block right after `<!-- tutorial: NAME -->`."""
    found = re.search(rf"<!-- tutorial: {re.escape(name)} -->\n```[a-z]*\n(.*?)\n```", page.read_text(encoding="utf-8"),
                      re.S)
    assert found, f"{page.name} has no block marked 'tutorial: {name}'"
    return found.group(1)


def commands(text: str) -> list[str]:
    """The commands of a shell block: one a line, a heredoc's body and `\\` continuations with
    their command; blank lines and comments left out."""
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        command = [line]
        while command[-1].endswith("\\") and i < len(lines):
            command.append(lines[i])
            i += 1
        heredoc = re.search(r"<<-?\s*'?\"?(\w+)'?\"?", command[-1])
        if heredoc:
            while i < len(lines):
                command.append(lines[i])
                i += 1
                if command[-1].strip() == heredoc.group(1):
                    break
            else:
                raise AssertionError(f"heredoc {heredoc.group(1)} is not closed: {line}")
        out.append("\n".join(command))
    return out


def run_block(cmds: list[str], *, cwd: Path, env: dict, timeout: float) -> list[tuple[str, int, str]]:
    """Run the commands one after another in one bash process; each one's exit status and
    output (stdout and stderr together)."""
    script = []
    for n, command in enumerate(cmds):
        script += [f"printf '\\n{MARK} start {n}\\n'", command, f"printf '\\n{MARK} end {n} %s\\n' \"$?\""]
    try:
        proc = subprocess.run(["bash", "-c", "\n".join(script)], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        shown = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        pytest.fail(f"the tutorial's commands ran past {timeout} s:\n{shown[-4000:]}")
    ran = []
    for n, command in enumerate(cmds):
        found = re.search(rf"\n{MARK} start {n}\n(.*?)\n{MARK} end {n} (\d+)\n", proc.stdout, re.S)
        assert found, f"{command!r} did not finish (bash exited {proc.returncode}):\n{proc.stdout[-4000:]}"
        ran.append((command, int(found.group(2)), found.group(1)))
    return ran


def check(ran: list[tuple[str, int, str]], expect: dict[str, list[str]]) -> None:
    for command, code, output in ran:
        assert code == 0, f"{command!r} exited {code}:\n{output[-4000:]}"
    for start, wanted in expect.items():
        matching = [(c, out) for c, _code, out in ran if c.startswith(start)]
        assert matching, f"the tutorial no longer runs a command starting {start!r}"
        for command, output in matching:
            for text in wanted:
                assert text in output, f"{command!r} did not print {text!r}:\n{output[-4000:]}"


def user_env(home: Path, *, path: list[Path] = ()) -> dict[str, str]:
    """The reader's environment: their HOME, the system PATH (no venv of ours), nothing of the
    test run's own soul or Hermes settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SOULGRAPH_", "HERMES_", "XDG_", "VIRTUAL_ENV", "PYTHON", "SOULFLEET_"))}
    env.update(HOME=str(home), PATH=os.pathsep.join([*map(str, path), SYSTEM_PATH]), TZ="UTC", COLUMNS="200",
               SOULFLEET_CACHE=os.environ.get("SOULFLEET_CACHE") or str(Path("~/.cache/soulfleet").expanduser()))
    return env


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """The reader's clone, with the `.venv` that `./run-local` makes first."""
    checkout = tmp_path_factory.mktemp("tutorial") / "soulfleet"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(checkout)], check=True, capture_output=True, timeout=300)
    started = time.monotonic()
    env = user_env(tmp_path_factory.mktemp("venv-home"))
    proc = subprocess.run(["scripts/ensure-venv"], cwd=checkout, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    print(f"\nclone's .venv: {time.monotonic() - started:.0f} s")
    return checkout


# -- part 1 ---------------------------------------------------------------------------------------

def test_the_local_block_parses_into_its_commands():
    cmds = commands(block("local"))
    assert cmds[0] == "./run-local" and len(cmds) == 5, cmds
    assert cmds[2].startswith("~/.soulfleet/current/venv/bin/python - <<'EOF'") and cmds[2].endswith("\nEOF")


def test_part_1_a_first_agent_with_memory_on_this_machine(clone, hermes_exe, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    hermes_client.make_hermes_home(home / ".hermes")  # the reader's `hermes setup`
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "hermes").symlink_to(hermes_exe)
    started = time.monotonic()
    ran = run_block(commands(block("local")), cwd=clone, env=user_env(home, path=[tools]), timeout=LOCAL_TIMEOUT)
    check(ran, LOCAL_EXPECT)
    search = next(out for c, _code, out in ran if " search " in c)
    assert ADDED in "\n".join(search.strip().splitlines()[:2]), search  # first in the list
    print(f"\ntutorial part 1: {time.monotonic() - started:.0f} s")


# -- part 2 ---------------------------------------------------------------------------------------

def lab_inventory(tutorial: dict, lab) -> dict:
    """The tutorial's inventory with the lab's hosts in place of the reader's (module docstring)."""
    data = yaml.safe_load(yaml.safe_dump(tutorial))
    everything = data["all"]
    everything.setdefault("vars", {}).update(known_hosts=str(lab.known_hosts), key=str(lab.key),
                                             gateway_restart_command=RESTART)
    names = [name for group in everything["children"].values() for name in (group.get("hosts") or {})]
    assert len(names) <= len(lab.hosts), names
    by_name = dict(zip(names, lab.hosts))
    for group in everything["children"].values():
        for name, host in (group.get("hosts") or {}).items():
            lab_host = by_name[name]
            host.update(address=lab_host.address, port=lab_host.port, user=lab_host.user, key=str(lab_host.key))
    return data


def test_the_tutorials_inventory_is_one_fleet_update_reads():
    from fleet import inventory

    loaded = inventory.parse(yaml.safe_load(block("inventory")))
    assert sorted(loaded.hosts) == ["worker-1", "worker-2"]
    assert loaded.hosts["worker-1"].vars["address"] == "10.0.0.11"
    assert all(h.vars["user"] == "agent" for h in loaded.hosts.values())
    fleet_block = block("fleet")
    assert "worker-1" in fleet_block and "-i inventory.yml" in fleet_block


@pytest.mark.lab
def test_part_2_a_two_host_fleet(clone, _ssh_lab_session, tmp_path):
    lab = _ssh_lab_session
    reset_to_bare_hermes(lab)  # two hosts as they look before their first deploy
    inventory = clone / "inventory.yml"
    inventory.write_text(yaml.safe_dump(lab_inventory(yaml.safe_load(block("inventory")), lab), sort_keys=False))
    home = tmp_path / "operator"
    home.mkdir()
    started = time.monotonic()
    try:
        ran = run_block(commands(block("fleet")), cwd=clone, env=user_env(home), timeout=FLEET_TIMEOUT)
    finally:
        inventory.unlink()
        lab.heal()
    check(ran, FLEET_EXPECT)
    for host in lab.hosts[:2]:
        assert (host.home / ".soulfleet" / "current").is_symlink()
        assert (host.home / "gateway-restarts").read_text() == "restart\n"  # --hermes restarted it once
    backups = home / ".local" / "share" / "soulfleet" / "backups"
    assert sorted(p.name for p in backups.iterdir()) == ["worker-1", "worker-2"]
    print(f"\ntutorial part 2: {time.monotonic() - started:.0f} s")


# -- troubleshooting.md ---------------------------------------------------------------------------

def quoted_messages(page: Path = TROUBLESHOOTING) -> list[str]:
    """The failure lines the page quotes: the code spans of the 'what it says' column of its
    tables."""
    messages = []
    column = None
    for line in page.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|"):
            column = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if column is None:
            column = cells.index("what it says") if "what it says" in cells else -1
            continue
        if column < 0 or set(line) <= set("|-: "):
            continue
        messages += re.findall(r"`([^`]+)`", cells[column])
    return messages


def code_text() -> str:
    """fleet/'s source, with adjacent string literals joined (a message split over two lines of
    code reads as one)."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "fleet").rglob("*.py")))
    return re.sub(r"""["']\s*\n\s*(?:rf|fr|f|r)?["']""", "", text)


SHORT_OK = {"no <…>"}  # too short to find by its words (`no {path}`); each check's own page says which


def test_every_message_the_troubleshooting_page_quotes_is_still_the_codes():
    messages = quoted_messages()
    assert len(messages) > 30, messages
    source = code_text()
    stale = []
    for message in messages:
        fragments = [f for f in re.split(r"<[^>]*>|…", message) if len(f.strip()) >= 4]
        if not fragments:
            assert re.sub(r"<[^>]*>", "<…>", message) in SHORT_OK, f"{message!r}: nothing in it to look for"
            continue
        stale += [f"{message!r}: {fragment!r}" for fragment in fragments if fragment.strip() not in source]
    assert not stale, "troubleshooting.md quotes what the code no longer says:\n" + "\n".join(stale)


def test_the_troubleshooting_page_names_every_check_verify_makes():
    checks = re.findall(r"^def test_(\w+)\(", (ROOT / "fleet" / "verify" / "host_checks.py").read_text(), re.M)
    text = TROUBLESHOOTING.read_text(encoding="utf-8")
    assert checks and [c for c in checks if f"`{c}`" not in text] == []


# -- links ----------------------------------------------------------------------------------------

def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("page", ["README.md", "tutorial.md", "troubleshooting.md"])
def test_links_name_pages_and_headings_that_exist(page):
    """Every relative link goes to a file, and every #anchor to a heading in it (docs/reference/
    is written apart: its pages are only linked)."""
    path = DOCS / page
    broken = []
    for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", path.read_text(encoding="utf-8")):
        if target.startswith(("http:", "https:")) or target.startswith("reference/"):
            continue
        linked = (path.parent / target) if target else path
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor:
            headings = {slug(line.lstrip("#")) for line in linked.read_text(encoding="utf-8").splitlines()
                        if line.startswith("#")}
            if anchor not in headings:
                broken.append(f"{target}#{anchor}: no such heading")
    assert not broken, f"docs/{page}: " + "; ".join(broken)


if __name__ == "__main__":  # print a block's commands, as the test splits them
    for c in commands(block(sys.argv[1] if len(sys.argv) > 1 else "local")):
        print("---\n" + c)
