"""`fleet memories HOST --web` against the real SSH lab: the host's memories page, reached through
an SSH tunnel from a local 127.0.0.1 port, with the host's server on its own loopback only and
gone once the operator's command ends (by Ctrl-C, or killed outright).

One host gets the runtime (fleet-update at this repository's HEAD) and a memory; a second stays
bare (no runtime: exit 1); a stopped host is unreachable (exit 4).
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from fleet.build import resolve_sha
from tests.fleet_helpers import clone_repo, reset_to_bare_hermes, run_fleet, run_update

pytestmark = pytest.mark.lab
RESTART = 'echo restart >> "$HOME/gateway-restarts"'
MEMORY = "the lighthouse keeper repaints the lamp room every spring"
FLEET = [sys.executable, "-c", "from fleet.cli import fleet; fleet()"]
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def web_lab(_ssh_lab_session, tmp_path_factory):
    lab = _ssh_lab_session
    reset_to_bare_hermes(lab)
    root = tmp_path_factory.mktemp("memories-web")
    served, bare = lab.hosts[0], lab.hosts[1]
    inventory = lab.write_inventory(root / "inventory.yml", groups={"workers": [served.name], "spare": [bare.name]},
                                    common_vars={"gateway_restart_command": RESTART})
    repo = clone_repo(root / "repo")
    code, out = run_update("--yes", "-i", str(inventory), "workers", resolve_sha("HEAD", repo), repo=repo)
    assert code == 0, out
    python = served.home / ".soulfleet" / "current" / "venv" / "bin" / "python"
    subprocess.run(["runuser", "-u", served.user, "--", str(python), "-c",
                    "import sys\nimport soulgraph.memory\nfrom soulgraph.store.soulfile import SoulFile\n"
                    "with SoulFile(sys.argv[1]).change() as g:\n    g.add(sys.argv[2], ['test'])",
                    str(served.home / ".hermes" / "soul.json"), MEMORY],
                   check=True, capture_output=True, timeout=120)
    yield lab, inventory, served, bare
    lab.heal()


def start_web(inventory: Path, host, *extra: str) -> tuple[subprocess.Popen, str, list[str]]:
    """`fleet memories --web` as the operator runs it; its URL once printed (at most 90 s)."""
    proc = subprocess.Popen([*FLEET, "memories", "-i", str(inventory), host.name, "--web", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    said: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [said.put(line) for line in proc.stdout] and None, daemon=True).start()
    lines, deadline = [], time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            line = said.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        lines.append(line.rstrip("\n"))
        if line.strip().startswith("http://"):
            return proc, line.strip(), lines
    proc.kill()
    pytest.fail(f"no URL printed: {lines} {finish(proc, 30)}")


def finish(proc: subprocess.Popen, seconds: float) -> str:
    """Wait for the command to end (TimeoutExpired after `seconds`); its stderr. (Its stdout is
    start_web's reader's.)"""
    proc.wait(timeout=seconds)
    return proc.stderr.read()


def servers(host) -> list[str]:
    found = subprocess.run(["pgrep", "-u", host.user, "-f", "soulgraph.memories serve"], capture_output=True,
                           text=True, timeout=30)
    return found.stdout.split()


def gone(host, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while servers(host):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def fetch(url: str, opener=None) -> tuple[int, str]:
    try:
        with (opener or urllib.request.build_opener()).open(url, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def listening(pids: list[str]) -> list[str]:
    """The local addresses the host's server processes listen on (ss -ltnp)."""
    table = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, timeout=30, check=True).stdout
    return [line.split()[3] for line in table.splitlines() if any(f"pid={pid}," in line for pid in pids)]


def test_web_page_through_the_tunnel_then_ctrl_c(web_lab):
    lab, inventory, host, _ = web_lab
    assert not servers(host)
    started = time.monotonic()
    proc, url, lines = start_web(inventory, host)
    try:
        up = time.monotonic() - started
        assert f"{host.name}: serving {host.home}/.hermes/soul.json (read-only)" in lines[0], lines
        local = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/\?token=([\w-]+)", url)
        assert local, url
        port, token = int(local.group(1)), local.group(2)

        # The page, with the token (it sets the session cookie and drops the token from the URL).
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        status, page = fetch(url, opener)
        assert status == 200 and "<html" in page.lower(), page[:300]
        # The host's soul, searched through the tunnel.
        status, body = fetch(f"http://127.0.0.1:{port}/api/search?q=lighthouse&token={token}")
        assert status == 200, body
        assert [r for r in json.loads(body)["results"] if MEMORY in json.dumps(r)], body
        status, body = fetch(f"http://127.0.0.1:{port}/api/session", opener)
        assert status == 200 and json.loads(body)["allow_edits"] is False
        # Without the token, or with a wrong one: refused.
        assert fetch(f"http://127.0.0.1:{port}/api/search?q=lighthouse")[0] == 403
        assert fetch(f"http://127.0.0.1:{port}/?token=wrong")[0] == 403

        # On the host the server listens on its loopback only: not on the host's own address.
        pids = servers(host)
        assert pids
        addresses = listening(pids)
        assert addresses and all(a.startswith("127.0.0.1:") for a in addresses), addresses
        remote_port = int(addresses[0].rsplit(":", 1)[1])
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((host.address, remote_port), timeout=5).close()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            err = finish(proc, 60)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"fleet memories --web did not end on Ctrl-C: {finish(proc, 30)}")
    assert proc.returncode == 0, err
    assert "Stopped." in err, err
    assert gone(host, 5), servers(host)  # stopped before the command returned (a little slack)
    print(f"\n{host.name}: the page's URL printed {up:.1f} s after `fleet memories --web` started")


def test_allow_edits_and_a_killed_command_ends_the_host_server(web_lab):
    lab, inventory, host, _ = web_lab
    proc, url, lines = start_web(inventory, host, "--allow-edits")
    try:
        assert "(edits allowed)" in lines[0], lines
        token = url.rsplit("token=", 1)[1]
        port = int(re.search(r":(\d+)/", url).group(1))
        status, body = fetch(f"http://127.0.0.1:{port}/api/session?token={token}")
        assert status == 200 and json.loads(body)["allow_edits"] is True, body
        assert servers(host)
    finally:
        proc.kill()  # no Ctrl-C, no goodbye: the connection just drops
        finish(proc, 30)
    assert gone(host, 30), f"the host's server outlived the operator's command: {servers(host)}"


def test_no_runtime_and_unreachable(web_lab):
    lab, inventory, host, bare = web_lab
    code, out = run_fleet("memories", "-i", str(inventory), bare.name, "--web")
    assert code == 1 and "no runtime deployed" in out, out
    lab.stop(host)
    try:
        code, out = run_fleet("memories", "-i", str(inventory), host.name, "--web")
    finally:
        lab.start(host)
    assert code == 4 and "unreachable" in out, out
    code, out = run_fleet("memories", "-i", str(inventory), host.name, "--web", "list")
    assert code == 2 and "--web takes only --allow-edits" in out, out
