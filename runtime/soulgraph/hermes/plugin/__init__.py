"""soulgraph: the soul graph as Hermes' memory provider (a MemoryProvider plugin).

Installed by `python -m soulgraph.install` into $HERMES_HOME/plugins/soulgraph/ and selected
with `memory.provider: soulgraph` in config.yaml. Hermes imports this file into its own
process and venv, so it uses the standard library only: the graph lives in a child process
started from soulfleet's release venv (`python -m soulgraph.hermes.memory_service`), spoken to
in JSON lines over its stdin/stdout. `settings.json` beside this file names that Python and the
soul file; the installer writes it.

Every call has a deadline, so a stuck child never holds a turn (see DEADLINES); writes go to a
queue drained by one background thread, so a turn never waits on them.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from agent.memory_provider import MemoryProvider

logger = logging.getLogger(__name__)

SETTINGS = Path(__file__).with_name("settings.json")
# Seconds. prefetch: how long a turn may wait for recall of its own message before the
# recall made in the background after the last turn is used instead; snapshot: the frozen
# block at session start; write: one queued write; flush: draining the queue at a session
# boundary; start: the child's first answer (it reads the soul file first).
DEADLINES = {"prefetch": 0.25, "snapshot": 5.0, "write": 10.0, "flush": 5.0, "start": 10.0, "stop": 3.0}
PREFETCH_HEADER = "From the soul graph (earlier sessions and what was learnt in them):"


def read_settings() -> Dict[str, Any]:
    try:
        return json.loads(SETTINGS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


class ServiceGone(RuntimeError):
    """The memory service did not answer in time or is not running."""


class ServiceClient:
    """One child process and the requests in flight to it."""

    def __init__(self, python: str, soul_file: str, log_path: Optional[Path] = None) -> None:
        self.command = [python, "-m", "soulgraph.hermes.memory_service", "--soul-file", soul_file]
        self.log_path = log_path
        self._process: Optional[subprocess.Popen] = None
        self._lock = threading.Lock()  # one writer on stdin; start/stop
        self._answers: Dict[int, Dict[str, Any]] = {}
        self._arrived = threading.Condition()
        self._next_id = 0

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
        for raw in process.stdout:
            try:
                answer = json.loads(raw)
            except ValueError:
                continue
            with self._arrived:
                self._answers[answer.get("id")] = answer
                self._arrived.notify_all()
        with self._arrived:  # the child is gone: wake every waiter
            self._arrived.notify_all()

    def call(self, op: str, args: Optional[Dict[str, Any]] = None, timeout: float = 5.0) -> Any:
        """The op's result; ServiceGone after `timeout` seconds or if the child died;
        RuntimeError with the service's message if it refused the request."""
        deadline = time.monotonic() + timeout
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._process = self._start()
            self._next_id += 1
            request_id = self._next_id
            line = json.dumps({"id": request_id, "op": op, "args": args or {}}, ensure_ascii=False) + "\n"
            try:
                self._process.stdin.write(line.encode("utf-8"))
                self._process.stdin.flush()
            except (BrokenPipeError, OSError) as exc:
                raise ServiceGone(f"memory service not running: {exc}") from None
            process = self._process
        with self._arrived:
            while request_id not in self._answers:
                left = deadline - time.monotonic()
                if left <= 0 or process.poll() is not None:
                    raise ServiceGone(f"memory service gave no answer to {op} within {timeout:g} s")
                self._arrived.wait(min(left, 0.5))
            answer = self._answers.pop(request_id)
        if not answer.get("ok"):
            raise RuntimeError(answer.get("error") or "refused")
        return answer.get("result")

    def stop(self, timeout: float = DEADLINES["stop"]) -> None:
        with self._lock:
            process, self._process = self._process, None
        if process is None:
            return
        try:
            process.stdin.close()  # the service ends when its input does
            process.wait(timeout)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait(1.0)


class SoulgraphMemoryProvider(MemoryProvider):
    """Hermes' lifecycle driving the host's soul graph (see the module text)."""

    def __init__(self, settings: Optional[Dict[str, Any]] = None) -> None:
        self.settings = read_settings() if settings is None else settings
        self.client: Optional[ServiceClient] = None
        self.session_id = ""
        self.platform = ""
        self.user_id = ""
        self.writes = True
        self._block: Optional[str] = None
        self._block_ready = threading.Event()
        self._background: Dict[str, str] = {}  # last queued recall: query and text
        self._queue: "queue.Queue[Optional[tuple]]" = queue.Queue()
        self._worker: Optional[threading.Thread] = None

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
        # Cron jobs, subagents and flush passes are not the user's conversation.
        self.writes = str(kwargs.get("agent_context") or "primary") == "primary"
        home = Path(str(kwargs.get("hermes_home") or os.environ.get("HERMES_HOME") or Path.home() / ".hermes"))
        logs = home / "logs"
        self.client = ServiceClient(self.settings["python"], self.settings["soul_file"],
                                    logs / "soulgraph-memory.log" if logs.is_dir() else None)
        threading.Thread(target=self._build_block, name="soulgraph-snapshot", daemon=True).start()
        self._worker = threading.Thread(target=self._drain, name="soulgraph-writes", daemon=True)
        self._worker.start()

    def _build_block(self) -> None:
        try:
            started = self.client.call("hello", timeout=DEADLINES["start"])
            del started
            text = self.client.call("snapshot", {"max_chars": int(self.settings.get("snapshot_chars", 2200))},
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
                                             "skip_session": self.session_id}, timeout=timeout)
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
        if self.client is not None and self.writes:
            self._queue.put((op, args))

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                op, args = item
                try:
                    self.client.call(op, args, timeout=DEADLINES["write"])
                except Exception as exc:
                    logger.warning("soulgraph: %s not written: %s", op, exc)
            finally:
                self._queue.task_done()

    def flush(self, timeout: float = DEADLINES["flush"]) -> bool:
        """Wait (at most `timeout` s) until every queued write is done."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def sync_turn(self, user_content: str, assistant_content: str, *, session_id: str = "",
                  messages: Optional[List[Dict[str, Any]]] = None) -> None:
        self._submit("sync_turn", {"user": user_content or "", "assistant": assistant_content or "",
                                   "session_id": session_id or self.session_id, "platform": self.platform,
                                   "user_id": self.user_id, "messages": _plain(messages or [])})

    def on_memory_write(self, action: str, target: str, content: str,
                        metadata: Optional[Dict[str, Any]] = None) -> None:
        self._submit("memory_write", {"action": action, "target": target, "content": content or "",
                                      "metadata": _plain(metadata or {})})

    def _consolidate(self, session_id: str, messages: Optional[List[Dict[str, Any]]] = None) -> str:
        if self.client is None or not self.writes:
            return ""
        self.flush()
        args: Dict[str, Any] = {"session_id": session_id}
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
        """The soul file and its journal when they live outside HERMES_HOME (what is inside
        it, `hermes backup` carries already)."""
        soul = self.settings.get("soul_file")
        if not soul:
            return []
        home = Path(os.environ.get("HERMES_HOME") or Path.home() / ".hermes").resolve()
        path = Path(soul).expanduser()
        try:
            path.resolve().relative_to(home)
            return []
        except ValueError:
            return [str(path), str(path) + ".journal"]

    def shutdown(self) -> None:
        if self.client is None:
            return
        self.flush()
        self._queue.put(None)
        self.client.stop()


def _plain(value: Any) -> Any:
    """Only what JSON can carry (message lists may hold SDK objects)."""
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return None


def register(ctx: Any) -> None:
    """Hermes' plugin entry point: register_memory_provider."""
    ctx.register_memory_provider(SoulgraphMemoryProvider())
