"""Run Hermes' own gateway (`hermes gateway run`, hermes-agent 0.19.0) from tests, bounded.

- ``free_port()``: a port on 127.0.0.1 nobody listens on.
- ``Gateway(home, ...)``: `hermes gateway run` in a process group of its own, its output in
  a log file, killed as a group at a hard deadline even if the test never stops it. As a
  context manager it starts, and stops on exit: SIGTERM to the group, then SIGKILL.
- ``wait_healthy(url)``: polls a GET /health until it answers 200 or the deadline passes.
- ``post_json(url, body, headers)``: one urllib request with a deadline; never raises on an
  HTTP status.

Hermes' plugins may start children in sessions of their own (our memory provider does, so a
Ctrl-C of Hermes is not theirs): those are outside the group, so the gateway's descendants
are collected from /proc before the group is signalled, and any still alive a few seconds
after the gateway ended (their stdin closed with it) are killed by pid.

The environment is hermes_client's clean one (proxies pointing at a dead loopback port,
NO_PROXY covering loopback): the gateway can reach the model stub on 127.0.0.1 and nothing
else. Facts behind the settings: docs/hermes-facts.md, "The API server (OpenAI-compatible)".
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests import hermes_chat, hermes_client

# Seconds. start: until /health answers (0.19.0 took ~7.5 s on an idle machine); life: the
# whole gateway process, after which its group is killed whatever the test is doing;
# request: one HTTP request; stop: SIGTERM to SIGKILL.
START_TIMEOUT = 45.0
LIFE_TIMEOUT = 150.0
REQUEST_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0
# No proxy handler at all: every URL here is on loopback.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def api_server_env(port: int, key: str) -> dict[str, str]:
    """The variables that turn on Hermes' API server on 127.0.0.1:port (gateway/config.py).
    The key is mandatory (16+ characters) even on loopback; requests send it as a Bearer."""
    if len(key) < 16:
        raise ValueError("the API server refuses keys shorter than 16 characters")
    return {"API_SERVER_ENABLED": "true", "API_SERVER_KEY": key,
            "API_SERVER_HOST": "127.0.0.1", "API_SERVER_PORT": str(port)}


def webhook_config(port: int, routes: dict[str, str]) -> dict:
    """config.yaml keys for Hermes' webhook adapter on 127.0.0.1:port, one route per name
    with the given prompt template (`{field}` is filled from the JSON payload). The routes are
    unsigned (INSECURE_NO_AUTH, which Hermes accepts on a loopback bind only) and their
    answers are only logged (deliver: log)."""
    return {"platforms": {"webhook": {"enabled": True, "extra": {
        "host": "127.0.0.1", "port": port,
        "routes": {name: {"secret": "INSECURE_NO_AUTH", "prompt": prompt, "deliver": "log"}
                   for name, prompt in routes.items()}}}}}


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


def request(method: str, url: str, *, body: Any = None, headers: dict[str, str] | None = None,
            timeout: float = REQUEST_TIMEOUT) -> Response:
    """One HTTP request to loopback with a deadline; the status is returned, not raised."""
    if not url.startswith(("http://127.0.0.1:", "http://localhost:")):
        raise ValueError(f"tests talk to loopback only, not {url}")
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={
        **({"Content-Type": "application/json"} if data is not None else {}), **(headers or {})})
    try:
        with _OPENER.open(req, timeout=timeout) as answer:
            return Response(answer.status, dict(answer.headers.items()), answer.read().decode("utf-8", "replace"))
    except urllib.error.HTTPError as exc:
        return Response(exc.code, dict(exc.headers.items()), exc.read().decode("utf-8", "replace"))


def post_json(url: str, body: Any, headers: dict[str, str] | None = None, *,
              timeout: float = REQUEST_TIMEOUT) -> Response:
    return request("POST", url, body=body, headers=headers, timeout=timeout)


def wait_healthy(url: str, *, timeout: float = START_TIMEOUT, gateway: "Gateway | None" = None) -> Response:
    """GET url until it answers 200; raises TimeoutError (with the gateway's log) otherwise,
    and at once if the gateway process ends first."""
    deadline = time.monotonic() + timeout
    last: str = "no answer"
    while time.monotonic() < deadline:
        if gateway is not None and gateway.returncode is not None:
            raise RuntimeError(f"the gateway exited ({gateway.returncode}) before {url} answered:\n{gateway.log_tail()}")
        try:
            answer = request("GET", url, timeout=min(2.0, max(0.1, deadline - time.monotonic())))
            if answer.status == 200:
                return answer
            last = f"HTTP {answer.status}: {answer.text[:200]}"
        except (OSError, urllib.error.URLError) as exc:
            last = repr(exc)
        time.sleep(0.2)
    tail = gateway.log_tail() if gateway is not None else ""
    raise TimeoutError(f"{url} did not answer 200 within {timeout:.0f}s (last: {last})\n{tail}")


def _descendants(pid: int) -> set[int]:
    """Every live descendant of pid, from /proc (whatever session or group they are in)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode("utf-8", "replace")
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses.
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


class Gateway:
    """`hermes gateway run` for one Hermes home, bounded. Use as a context manager."""

    def __init__(self, home: Path | str, *, extra_env: dict[str, str] | None = None,
                 life_timeout: float = LIFE_TIMEOUT, cwd: Path | str | None = None):
        self.home = Path(home)
        self.extra_env = dict(extra_env or {})
        self.life_timeout = life_timeout
        self.cwd = Path(cwd) if cwd else hermes_chat.default_workdir(self.home)
        self.log_path = self.home.parent / f"{self.home.name}-gateway.log"
        self.process: subprocess.Popen | None = None
        self.started_at: float | None = None
        self.killed_at_deadline = False
        self._known: set[int] = set()  # descendants seen so far (a child may exit before stop)
        self._watchdog: threading.Timer | None = None
        self._stop_lock = threading.Lock()

    # ---- lifecycle
    def start(self) -> "Gateway":
        hermes = hermes_client.ensure_hermes_venv()
        env = hermes_client.hermes_env(self.home, extra_env=self.extra_env)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen([str(hermes), "gateway", "run"], env=env, cwd=str(self.cwd),
                                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        self.started_at = time.monotonic()
        self._watchdog = threading.Timer(self.life_timeout, self._deadline)
        self._watchdog.daemon = True
        self._watchdog.start()
        return self

    def _deadline(self) -> None:
        self.killed_at_deadline = True
        self.stop(grace=0)

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def track_children(self) -> set[int]:
        """Remember the gateway's descendants now (stop() kills those left over)."""
        if self.process is not None and self.process.poll() is None:
            self._known |= _descendants(self.process.pid)
        return set(self._known)

    def stop(self, grace: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM to the group, SIGKILL after `grace` seconds; then every descendant seen
        that is still alive a few seconds later is killed by pid. Returns the exit status."""
        with self._stop_lock:
            if self.process is None:
                return None
            if self._watchdog is not None:
                self._watchdog.cancel()
            self.track_children()
            pid = self.process.pid
            if self.process.poll() is None and grace > 0:
                self._signal_group(pid, signal.SIGTERM)
                try:
                    self.process.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    pass
            self._signal_group(pid, signal.SIGKILL)  # leftovers of the group, too
            try:
                self.process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass
            # Children in sessions of their own see their stdin close and end; a few seconds.
            until = time.monotonic() + 5.0
            while time.monotonic() < until and any(_alive(p) for p in self._known):
                time.sleep(0.1)
            for child in self._known:
                if _alive(child):
                    try:
                        os.kill(child, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
            return self.process.poll()

    @staticmethod
    def _signal_group(pid: int, sig: int) -> None:
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def __enter__(self) -> "Gateway":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- what tests read
    def log_tail(self, chars: int = 4000) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no gateway log)"
        return f"--- gateway log ({self.log_path}) ---\n{text[-chars:]}"
