"""soulgraph: the soul graph as Hermes' memory provider (a MemoryProvider plugin).

Installed by `python -m soulgraph.install` into $HERMES_HOME/plugins/soulgraph/ and selected
with `memory.provider: soulgraph` in config.yaml. Hermes imports this file into its own
process and venv, so it uses the standard library only: the graph lives in a child process
started from soulfleet's release venv (`python -m soulgraph.hermes.memory_service`), spoken to
in JSON lines over its stdin/stdout. `settings.json` beside this file names that Python and the
soul file; the installer writes it.

Every call has a deadline, so a stuck child never holds a turn (see DEADLINES); writes go to a
queue drained by one background thread, so a turn never waits on them. A write stays queued
until the service acknowledges it: a service that died or stopped answering is restarted and
the write sent again, under an id of its own (`turn_id`, `write_id`) by which the service
recognises one it already stored. The queue holds at most MAX_PENDING writes; when it is full
the oldest waiting one is dropped and logged, and Hermes never waits.

One memory service per soul file serves every provider of a Hermes process (`shared_client`):
a gateway makes an agent, and so a provider, per session (its API server one per request,
and it never shuts them down), and requests carry their scope, so one child is enough. It
ends with the last provider's shutdown; a provider's writer thread ends after IDLE_SECONDS
with nothing to send, so a provider Hermes drops holds no thread.

Scopes: a gateway serves many users through one agent. Every request names the scope of the
session's user (`session_scope`), and the service reads the shared memories and that user's
only, and writes into that user's. Cron jobs and flush passes write nothing; what a subagent did comes back to
its parent (`on_delegation`) and is written as a turn of the parent's session, in the
parent's user's scope (Hermes 0.19 starts no provider for a subagent itself).
"""

from __future__ import annotations

import collections
import json
import logging
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

from agent.memory_provider import MemoryProvider

logger = logging.getLogger(__name__)

SETTINGS = Path(__file__).with_name("settings.json")
# Seconds. prefetch: how long a turn may wait for recall of its own message before the
# recall made in the background after the last turn is used instead; snapshot: the frozen
# block at session start; write: one queued write; flush: draining the queue at a session
# boundary; start: the child's first answer (it reads the soul file first).
DEADLINES = {"prefetch": 0.25, "snapshot": 5.0, "write": 10.0, "flush": 5.0, "start": 10.0, "stop": 3.0,
             "backup": 120.0}
# Writes kept until the service acknowledges them. A turn is a few kB, so the bound is a few MB
# at most; it is reached only when the service cannot be started for a long while.
MAX_PENDING = 1000
# Seconds between two tries of an unacknowledged write: doubled per failure, up to the last.
RETRY_PAUSE = (0.05, 5.0)
# The longest request line the service reads (memory_service.MAX_LINE_CHARS): a longer write is
# dropped here, with a log line, instead of being refused there over and over.
MAX_LINE_CHARS = 64 << 20
IDLE_SECONDS = 60.0  # a writer thread with nothing to send ends after this; the next write starts one
PREFETCH_HEADER = "From the soul graph (earlier sessions and what was learnt in them):"


# Where the person at the keyboard is the agent's operator: a session there with no user id
# reads and writes the shared memory. Anywhere else (a gateway), no user id is never shared.
LOCAL_PLATFORMS = frozenset({"", "cli", "tui", "acp", "local"})


def session_scope(kwargs: Dict[str, Any]) -> str:
    """The scope of the session Hermes describes at `initialize`: `platform:user` with user
    `user_id_alt or user_id` (Hermes' own key for a participant); on a gateway without a
    user id (Hermes' API server sends none), the gateway's session key (the
    X-Hermes-Session-Key header), else the session itself; shared only on a local platform."""
    platform = str(kwargs.get("platform") or "")
    user_id, user_id_alt = str(kwargs.get("user_id") or ""), str(kwargs.get("user_id_alt") or "")
    if (user_id_alt or user_id).strip():
        return scope_of(platform, user_id, user_id_alt)
    if platform.strip().lower() in LOCAL_PLATFORMS:
        return ""
    key = str(kwargs.get("gateway_session_key") or "").strip()
    return scope_of(platform, f"key:{key}" if key else f"session:{kwargs.get('session_id') or 'unnamed'}")


def scope_of(platform: str, user_id: str, user_id_alt: str = "") -> str:
    """The scope key of a user (memory/scopes.py's `user_scope`, kept in step by a test:
    this file may import nothing of ours)."""
    who = str(user_id_alt or user_id or "").strip()
    if not who:
        return ""
    place = "".join(c if c.isascii() and (c.isalnum() or c in "_.-") else "-" for c in str(platform or "").strip().lower())
    place = place[:40].strip("-_.") or "unknown"
    clean = "".join(c for c in who if ord(c) >= 32 and ord(c) != 127)[:300 - len(place) - 1].strip()
    return f"{place}:{clean or 'x' + who.encode('utf-8', 'surrogatepass').hex()[:200]}"


# Files Hermes puts in its own system prompt: the snapshot never repeats what they say.
PROMPT_FILES = ("memories/MEMORY.md", "memories/USER.md", "SOUL.md")
PROMPT_FILE_CHARS = 200_000


def hermes_prompt_files(home: Optional[Path]) -> List[str]:
    """The text of Hermes' own memory files and SOUL.md in `home` (missing ones left out)."""
    texts = []
    for name in PROMPT_FILES if home is not None else ():
        try:
            with open(home / name, encoding="utf-8", errors="replace") as handle:
                texts.append(handle.read(PROMPT_FILE_CHARS))
        except OSError:
            continue
    return texts


def read_settings(path: Path = SETTINGS) -> Dict[str, Any]:
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return settings if isinstance(settings, dict) else {}


class ServiceGone(RuntimeError):
    """The memory service did not answer in time or is not running."""


class ServiceRefused(RuntimeError):
    """The service answered with an error; `retry`: whether the same request may succeed later
    (the store was busy or failed) or never will (the request itself is wrong)."""

    def __init__(self, message: str, retry: bool = False) -> None:
        super().__init__(message)
        self.retry = retry


class ServiceClient:
    """One child process and the requests in flight to it."""

    def __init__(self, python: str, soul_file: str, log_path: Optional[Path] = None) -> None:
        self.command = [python, "-m", "soulgraph.hermes.memory_service", "--soul-file", soul_file]
        self.log_path = log_path
        self._process: Optional[subprocess.Popen] = None
        self._lock = threading.Lock()  # one writer on stdin; start/stop
        self._answers: Dict[int, Dict[str, Any]] = {}
        self._waiting: set = set()  # ids someone still waits for; a later answer is dropped
        self._arrived = threading.Condition()
        self._next_id = 0
        self._closed = False

    def _start(self) -> subprocess.Popen:
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        try:
            process = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                       start_new_session=True)  # Hermes' Ctrl-C is not ours to take
        finally:
            if log is not subprocess.DEVNULL:
                log.close()
        reader = threading.Thread(target=self._read, args=(process,), name="soulgraph-memory-reader", daemon=True)
        reader.start()
        return process

    def _read(self, process: subprocess.Popen) -> None:
        # Blocks only on this child's output, which ends when the child does; every caller
        # waiting for an answer has its own deadline (call()).
        for raw in process.stdout:
            try:
                answer = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(answer, dict):
                continue
            with self._arrived:
                if answer.get("id") in self._waiting:
                    self._answers[answer["id"]] = answer
                    self._arrived.notify_all()
        with self._arrived:  # the child is gone: wake every waiter
            self._arrived.notify_all()

    def call(self, op: str, args: Optional[Dict[str, Any]] = None, timeout: float = 5.0,
             start_timeout: float = 0.0) -> Any:
        """The op's result; ServiceGone after `timeout` seconds (plus `start_timeout` when this
        call had to start the service) or if the child died; ServiceRefused with the
        service's message if it refused the request."""
        body = json.dumps({"op": op, "args": args or {}}, ensure_ascii=False)  # the id goes in front below
        if len(body) + 32 > MAX_LINE_CHARS:
            raise ServiceRefused(f"{op}: a request of {len(body):,} characters, more than the service reads")
        with self._lock:
            if self._closed:
                raise ServiceGone("memory service stopped")
            if self._process is None or self._process.poll() is not None:
                if self._process is not None:
                    _close_input(self._process)  # the dead one's pipe: no descriptor kept per restart
                try:
                    self._process = self._start()
                except OSError as exc:  # the release's Python gone or not runnable: try again later
                    raise ServiceGone(f"memory service cannot start: {exc}") from None
                timeout += start_timeout
            deadline = time.monotonic() + timeout
            self._next_id += 1
            request_id = self._next_id
            line = f'{{"id": {request_id}, {body[1:]}\n'
            with self._arrived:
                self._waiting.add(request_id)
            try:
                self._process.stdin.write(line.encode("utf-8"))
                self._process.stdin.flush()
            except (BrokenPipeError, OSError) as exc:
                with self._arrived:
                    self._waiting.discard(request_id)
                raise ServiceGone(f"memory service not running: {exc}") from None
            process = self._process
        with self._arrived:
            try:
                while request_id not in self._answers:
                    left = deadline - time.monotonic()
                    if left <= 0 or process.poll() is not None:
                        raise ServiceGone(f"memory service gave no answer to {op} within {timeout:g} s"
                                          if left <= 0 else f"memory service ended ({process.returncode}) "
                                                            f"before it answered {op}")
                    self._arrived.wait(min(left, 0.5))
                answer = self._answers.pop(request_id)
            finally:
                self._waiting.discard(request_id)
                self._answers.pop(request_id, None)
        if not answer.get("ok"):
            raise ServiceRefused(answer.get("error") or "refused", bool(answer.get("retry")))
        return answer.get("result")

    def restart(self) -> None:
        """End a service that stopped answering; the next call starts a fresh one."""
        with self._lock:
            process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.kill()
            try:
                process.wait(DEADLINES["stop"])
            except subprocess.TimeoutExpired:
                pass
        _close_input(process)

    def stop(self, timeout: float = DEADLINES["stop"]) -> None:
        with self._lock:
            process, self._process = self._process, None
            self._closed = True  # a write still in the queue starts no new service
        if process is None:
            return
        try:
            process.stdin.close()  # the service ends when its input does
            process.wait(timeout)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait(1.0)


_SHARED: Dict[tuple, List[Any]] = {}  # (python, soul file, log) -> [client, providers using it]
_SHARED_LOCK = threading.Lock()


def shared_client(python: str, soul_file: str, log_path: Optional[Path]) -> ServiceClient:
    """The memory service client for this soul file, one per process (see the module text)."""
    key = (python, soul_file, str(log_path))
    with _SHARED_LOCK:
        entry = _SHARED.get(key)
        if entry is None or entry[0]._closed:
            entry = _SHARED[key] = [ServiceClient(python, soul_file, log_path), 0]
        entry[1] += 1
        return entry[0]


def release_client(client: ServiceClient) -> None:
    """One provider is done with `client`: the last one stops the service."""
    with _SHARED_LOCK:
        for key, entry in list(_SHARED.items()):
            if entry[0] is client:
                entry[1] -= 1
                if entry[1] > 0:
                    return
                del _SHARED[key]
                break
    client.stop()


def _close_input(process: subprocess.Popen) -> None:
    try:
        process.stdin.close()
    except OSError:
        pass  # a pipe to a dead child may fail to flush: it is closed all the same


class SoulgraphMemoryProvider(MemoryProvider):
    """Hermes' lifecycle driving the host's soul graph (see the module text)."""

    def __init__(self, settings: Optional[Dict[str, Any]] = None) -> None:
        self.settings = read_settings() if settings is None else settings
        self.client: Optional[ServiceClient] = None
        self.session_id = ""
        self.platform = ""
        self.user_id = ""
        self.scope = ""  # whose memories this session reads and writes ("": shared, no user)
        self.home: Optional[Path] = None  # the Hermes home (its memory files are in the prompt already)
        self.writes = True  # the session's turns and consolidation
        self.memory_writes = True  # Hermes' memory-tool entries
        self._block: Optional[str] = None
        self._block_ready = threading.Event()
        self._background: Dict[str, str] = {}  # last queued recall: query and text
        # Writes not yet acknowledged, oldest first (op, args); the head is the one being sent.
        self._pending: "collections.deque[tuple]" = collections.deque()
        self._pending_changed = threading.Condition()
        self._sending: Optional[tuple] = None
        self._stopping = False
        self._generation = 0
        self.dropped = 0  # writes dropped because the queue was full
        self._worker: Optional[threading.Thread] = None
        self._worker_generation = 0

    @property
    def name(self) -> str:
        return "soulgraph"

    # ------------------------------------------------------------------ set-up
    def is_available(self) -> bool:
        python = self.settings.get("python")
        return bool(python) and os.path.exists(python) and bool(self.settings.get("soul_file"))

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        self.session_id = session_id or ""
        self.platform = str(kwargs.get("platform") or "")
        self.user_id = str(kwargs.get("user_id") or "")
        self.scope = session_scope({**kwargs, "session_id": self.session_id})
        home = Path(str(kwargs.get("hermes_home") or os.environ.get("HERMES_HOME") or Path.home() / ".hermes"))
        # A gateway serving several profiles (multiplex_profiles) imports this module once:
        # the settings are the routed profile's own, when it has them.
        own = home / "plugins" / "soulgraph" / "settings.json"
        if own != SETTINGS and own.is_file():
            self.settings = read_settings(own) or self.settings
        # Cron jobs, subagents and flush passes are not the user's conversation: no turns. A
        # subagent's memory-tool writes go to the scope it was given (Hermes 0.19 starts no
        # provider for subagents or cron jobs at all); cron's and flush's are nobody's.
        context = str(kwargs.get("agent_context") or "primary")
        self.writes = context == "primary"
        self.memory_writes = context in ("primary", "subagent")
        logs = home / "logs"
        if self.client is not None:  # initialized again without a shutdown: one share, not two
            release_client(self.client)
        self.home = home
        self.client = shared_client(self.settings["python"], self.settings["soul_file"],
                                    logs / "soulgraph-memory.log" if logs.is_dir() else None)
        threading.Thread(target=self._build_block, name="soulgraph-snapshot", daemon=True).start()
        with self._pending_changed:
            # A provider initialized again (after a shutdown) gets one writer of its own; an old
            # one still finishing a call sees the generation change and ends.
            self._stopping = False
            self._generation += 1
            self._start_writer()

    def _start_writer(self) -> None:
        """A writer thread, unless one is running (call holding `_pending_changed`)."""
        if self._worker is not None and self._worker.is_alive() and self._worker_generation == self._generation:
            return
        self._worker_generation = self._generation
        self._worker = threading.Thread(target=self._drain, args=(self._generation,), name="soulgraph-writes",
                                        daemon=True)
        self._worker.start()

    def _build_block(self) -> None:
        try:
            started = self.client.call("hello", timeout=DEADLINES["start"])
            del started
            text = self.client.call("snapshot", {"max_chars": int(self.settings.get("snapshot_chars", 2200)),
                                                 "scope": self.scope, "known": hermes_prompt_files(self.home)},
                                    timeout=DEADLINES["snapshot"])["text"]
            self._block = text.strip()
        except Exception as exc:  # a provider never breaks the agent
            logger.warning("soulgraph: no snapshot for this session: %s", exc)
            self._block = ""
        finally:
            self._block_ready.set()

    def system_prompt_block(self) -> str:
        """The bounded snapshot, built once at session start and frozen for the session."""
        if self.client is None:
            return ""
        self._block_ready.wait(DEADLINES["start"] + DEADLINES["snapshot"])
        if not self._block:
            return ""
        return "# Soul graph (long-term memory)\n" + self._block

    def get_tool_schemas(self) -> List[Dict[str, Any]]:
        return []  # the tools are the MCP server's (mcp_servers.soul)

    # ------------------------------------------------------------------ recall
    def _recall(self, query: str, timeout: float) -> str:
        result = self.client.call("recall", {"query": query, "budget": int(self.settings.get("recall_chars", 1500)),
                                             "skip_session": self.session_id, "scope": self.scope}, timeout=timeout)
        return result["text"]

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        if self.client is None or not (query or "").strip():
            return ""
        try:
            text = self._recall(query, DEADLINES["prefetch"])
        except Exception as exc:
            logger.debug("soulgraph: prefetch fell back to the background recall: %s", exc)
            text = self._background.get("text", "")
        return f"{PREFETCH_HEADER}\n{text}" if text else ""

    def queue_prefetch(self, query: str, *, session_id: str = "") -> None:
        if self.client is None or not (query or "").strip():
            return
        try:
            self._background = {"query": query, "text": self._recall(query, DEADLINES["write"])}
        except Exception as exc:
            logger.debug("soulgraph: background recall failed: %s", exc)

    # ------------------------------------------------------------------ writes
    def _submit(self, op: str, args: Dict[str, Any]) -> None:
        if self.client is None or not (self.memory_writes if op == "memory_write" else self.writes):
            return
        args = {**args, "scope": self.scope}  # fixed when queued: a later switch of user changes no old write
        with self._pending_changed:
            if len(self._pending) >= MAX_PENDING:
                # The oldest that is not being sent right now: the agent never waits on us.
                at = 1 if self._sending is not None and self._pending[0] is self._sending else 0
                old_op, old_args = self._pending[at]
                del self._pending[at]
                self.dropped += 1
                logger.warning("soulgraph: write queue full (%d writes the memory service has not acknowledged): "
                               "dropped the oldest, %s %s", MAX_PENDING, old_op, _describe(old_op, old_args))
            self._pending.append((op, args))
            self._start_writer()  # the last one may have ended, idle
            self._pending_changed.notify_all()

    def _drain(self, generation: int) -> None:
        """Send the queue's head until the service acknowledges it, then the next."""
        pause = RETRY_PAUSE[0]
        while True:
            with self._pending_changed:
                idle_until = time.monotonic() + IDLE_SECONDS
                while not self._pending and not self._stopping and generation == self._generation:
                    left = idle_until - time.monotonic()
                    if left <= 0:  # nothing to send for a while: end; _submit starts another
                        if self._worker is threading.current_thread():
                            self._worker = None
                        return
                    self._pending_changed.wait(left)
                if self._stopping or generation != self._generation:
                    return
                item = self._sending = self._pending[0]
            op, args = item
            done = True
            try:
                self.client.call(op, args, timeout=DEADLINES["write"], start_timeout=DEADLINES["start"])
            except ServiceRefused as exc:
                done = not exc.retry
                logger.warning("soulgraph: %s %s %s: %s", op, _describe(op, args),
                               "not written yet, will retry" if exc.retry else "refused, not written", exc)
            except ServiceGone as exc:
                # Dead or stuck: a fresh service gets the write again; if the old one stored
                # it before it went, the id makes the new one acknowledge it without a copy.
                done = False
                logger.warning("soulgraph: %s %s not acknowledged, will retry: %s", op, _describe(op, args), exc)
                self.client.restart()
            except Exception as exc:  # never the end of the writer thread
                logger.warning("soulgraph: %s %s not written: %s", op, _describe(op, args), exc)
            with self._pending_changed:
                self._sending = None
                if done and self._pending and self._pending[0] is item:
                    self._pending.popleft()
                self._pending_changed.notify_all()
                if done:
                    pause = RETRY_PAUSE[0]
                    continue
                self._pending_changed.wait(pause)  # woken early by shutdown
            pause = min(pause * 2, RETRY_PAUSE[1])

    def pending(self) -> int:
        """Writes the service has not acknowledged yet."""
        with self._pending_changed:
            return len(self._pending)

    def flush(self, timeout: float = DEADLINES["flush"]) -> bool:
        """Wait (at most `timeout` s) until the service has acknowledged every queued write."""
        deadline = time.monotonic() + timeout
        with self._pending_changed:
            while self._pending or self._sending is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._pending_changed.wait(min(left, 0.5))
        return True

    def sync_turn(self, user_content: str, assistant_content: str, *, session_id: str = "",
                  messages: Optional[List[Dict[str, Any]]] = None) -> None:
        self._submit("sync_turn", {"user": user_content or "", "assistant": assistant_content or "",
                                   "session_id": session_id or self.session_id, "platform": self.platform,
                                   "user_id": self.user_id, "messages": _plain(messages or []) or [],
                                   "turn_id": uuid.uuid4().hex})

    def on_delegation(self, task: str, result: str, *, child_session_id: str = "", **kwargs: Any) -> None:
        """A subagent of this session finished: what it was asked and what it answered, as a
        turn of this session (so in its user's scope). Its words are the agent's, not the
        user's: they go in the assistant's part, which consolidation never promotes."""
        if not (task or "").strip() and not (result or "").strip():
            return
        done = f"A subagent{f' ({child_session_id})' if child_session_id else ''} was asked: {task or ''}\n" \
               f"It answered: {result or ''}"
        self._submit("sync_turn", {"user": "", "assistant": done, "session_id": self.session_id,
                                   "platform": self.platform, "user_id": self.user_id, "messages": [],
                                   "turn_id": uuid.uuid4().hex})

    def on_memory_write(self, action: str, target: str, content: str,
                        metadata: Optional[Dict[str, Any]] = None) -> None:
        self._submit("memory_write", {"action": action, "target": target, "content": content or "",
                                      "metadata": _plain(metadata or {}) or {}, "write_id": uuid.uuid4().hex})

    def _consolidate(self, session_id: str, messages: Optional[List[Dict[str, Any]]] = None) -> str:
        if self.client is None or not self.writes:
            return ""
        self.flush()
        args: Dict[str, Any] = {"session_id": session_id, "scope": self.scope}
        if messages:
            args["messages"] = [{"role": m.get("role"), "content": m.get("content")}
                                for m in _plain(messages) or () if isinstance(m, dict) and m.get("role") == "user"]
        try:
            result = self.client.call("consolidate", args, timeout=DEADLINES["flush"])
        except Exception as exc:
            logger.warning("soulgraph: consolidation skipped: %s", exc)
            return ""
        return result.get("summary", "")

    def on_pre_compress(self, messages: List[Dict[str, Any]]) -> str:
        # The turn in progress is not synced yet: its messages are consolidated as they are.
        return self._consolidate(self.session_id, messages)

    def on_session_end(self, messages: List[Dict[str, Any]]) -> None:
        self._consolidate(self.session_id)

    def on_session_switch(self, new_session_id: str, *, parent_session_id: str = "", reset: bool = False,
                          rewound: bool = False, **kwargs: Any) -> None:
        if reset and self.session_id:
            self._consolidate(self.session_id)
        self.session_id = new_session_id or self.session_id

    def backup_paths(self) -> List[str]:
        """A consistent copy of the soul file, made now by the store, for `hermes backup`.

        Hermes copies what it archives one file at a time, without the store's lock: a
        compaction between its copy of soul.json and of the journal leaves a pair that does
        not load (docs/backup.md). `store backup` writes the whole graph as one checked file
        instead; `store restore` installs it. If no copy can be made, the live files outside
        the home are named, as before (those inside it Hermes' walk carries already)."""
        soul, python = self.settings.get("soul_file"), self.settings.get("python")
        if not soul:
            return []
        path = Path(soul).expanduser()
        copy = path.with_name(path.name.removesuffix(".json") + "-hermes-backup.json")
        try:
            done = subprocess.run([python, "-m", "soulgraph.store", "backup", str(path), str(copy), "--force"],
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=DEADLINES["backup"])
            if done.returncode == 0:
                return [str(copy)]
            logger.warning("soulgraph: no consistent copy for hermes backup: %s", done.stderr.strip())
        except (OSError, TypeError, subprocess.TimeoutExpired) as exc:
            logger.warning("soulgraph: no consistent copy for hermes backup: %s", exc)
        home = Path(os.environ.get("HERMES_HOME") or Path.home() / ".hermes").resolve()
        try:
            path.resolve().relative_to(home)
            return []
        except ValueError:
            return [str(path), str(path) + ".journal"]

    def shutdown(self) -> None:
        if self.client is None:
            return
        self.flush()
        with self._pending_changed:
            self._stopping = True
            left = len(self._pending)
            self._pending_changed.notify_all()
        if left:
            logger.warning("soulgraph: %d write(s) not acknowledged by the memory service at shutdown, "
                           "not written", left)
        client, self.client = self.client, None
        release_client(client)


def _describe(op: str, args: Dict[str, Any]) -> str:
    """A write named for the log, without its text."""
    if op == "sync_turn":
        return f"(session {args.get('session_id')!r}, turn id {args.get('turn_id')})"
    return f"({args.get('action')} {args.get('target')}, write id {args.get('write_id')})"


def _plain(value: Any) -> Any:
    """Only what JSON can carry (message lists may hold SDK objects)."""
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return None


def register(ctx: Any) -> None:
    """Hermes' plugin entry point: register_memory_provider."""
    ctx.register_memory_provider(SoulgraphMemoryProvider())
