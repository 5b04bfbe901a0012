"""A local stand-in for an OpenAI-compatible LLM provider, for driving real Hermes sessions.

A real HTTP server (standard library ``http.server``, one thread per request) bound to
127.0.0.1 on a free port. It speaks enough of the chat-completions wire protocol for the
OpenAI Python SDK that Hermes uses:

- ``POST /v1/chat/completions``: answers with the next scripted reply, as one JSON body or,
  when the request says ``"stream": true``, as server-sent events (``chat.completion.chunk``
  objects, a usage chunk when ``stream_options.include_usage`` asks for one, then
  ``data: [DONE]``);
- ``GET /v1/models`` and ``GET /v1/models/<id>``: one model, with a ``context_length``;
- anything else (Hermes probes /api/v1/models, /api/show, ... to detect LM Studio, Ollama and
  the like): a 404 JSON error, still recorded, so a test can see what was tried.

Every request is recorded (method, path, headers, parsed JSON body). When the script runs
out, the stub answers with a default short text, so an extra call (a title, a summary)
never hangs a session.

    with OpenAIStub(replies=[tool_reply(call("memory", {...})), text_reply("Done.")]) as stub:
        ... stub.base_url ...        # http://127.0.0.1:PORT/v1
        stub.requests                # bodies of the chat-completion requests, in order

Which requests take scripted replies is decided by ``takes_script`` (a predicate on the
request body). By default every chat-completion request does; Hermes also makes side
calls (session titles, compression summaries) that a test may want to route to the
default reply instead: see ``is_agent_turn``.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

DEFAULT_MODEL = "stub-model"
DEFAULT_CONTEXT_LENGTH = 200_000
DEFAULT_TEXT = "OK."
CHAT_PATH = "/v1/chat/completions"


# --------------------------------------------------------------------------
# Scripted replies
# --------------------------------------------------------------------------

def call(name: str, arguments: dict | str | None = None, *, id: str | None = None) -> dict:
    """One tool call of a scripted reply: the function name and its JSON arguments."""
    if arguments is None:
        arguments = {}
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": id or f"call_{uuid.uuid4().hex[:12]}", "type": "function",
            "function": {"name": name, "arguments": args}}


def text_reply(content: str, *, usage: dict | None = None) -> dict:
    """An assistant message with plain text (finish_reason "stop")."""
    return {"content": content, "tool_calls": [], "usage": usage}


def tool_reply(*calls: dict, content: str | None = None, usage: dict | None = None) -> dict:
    """An assistant message asking for tool calls (finish_reason "tool_calls")."""
    if not calls:
        raise ValueError("tool_reply needs at least one call(...)")
    return {"content": content, "tool_calls": list(calls), "usage": usage}


def _normalize(reply: Any) -> dict:
    if isinstance(reply, str):
        return text_reply(reply)
    if isinstance(reply, dict) and ("content" in reply or "tool_calls" in reply):
        return {"content": reply.get("content"), "tool_calls": list(reply.get("tool_calls") or []),
                "usage": reply.get("usage")}
    raise TypeError(f"not a scripted reply: {reply!r} (use text_reply / tool_reply)")


# --------------------------------------------------------------------------
# Request classification helpers
# --------------------------------------------------------------------------

def message_text(message: dict) -> str:
    """The text of one chat message, whether its content is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def request_text(body: dict) -> str:
    """All message texts of a request body, joined (for `in` checks)."""
    return "\n".join(message_text(m) for m in body.get("messages") or [])


def is_agent_turn(body: dict) -> bool:
    """A request from Hermes' agent loop: it offers the agent's tools.

    Hermes' side calls (title generation, context-compression summaries) go through its
    auxiliary client without a ``tools`` list.
    """
    return bool(body.get("tools"))


# --------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------

@dataclass
class Seen:
    """One request as it reached the stub."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, the raw text if it was not JSON, or None
    answered_with: dict | None = None  # the reply given (chat completions only)
    scripted: bool = False  # True if the reply came from the script
    at: float = field(default_factory=time.monotonic)


class OpenAIStub:
    """A scripted OpenAI-compatible endpoint on 127.0.0.1. Use as a context manager."""

    def __init__(self, replies: list | None = None, *, model: str = DEFAULT_MODEL,
                 context_length: int = DEFAULT_CONTEXT_LENGTH, default_reply: Any = DEFAULT_TEXT,
                 takes_script: Callable[[dict], bool] | None = None,
                 chunk_size: int = 16):
        self.model = model
        self.context_length = context_length
        self.default_reply = default_reply
        self.takes_script = takes_script or (lambda body: True)
        self.chunk_size = max(1, chunk_size)
        self._script = [_normalize(r) for r in (replies or [])]
        self._lock = threading.Lock()
        self.seen: list[Seen] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._ids = itertools.count(1)

    # ---- lifecycle
    def start(self) -> "OpenAIStub":
        stub = self

        class Handler(_Handler):
            owner = stub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.1},
                                        name="openai-stub", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "OpenAIStub":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- what tests read
    @property
    def port(self) -> int:
        assert self._server is not None, "stub not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, with the /v1 suffix the SDK expects."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def chat_requests(self) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.method == "POST" and s.path.rstrip("/") == CHAT_PATH]

    @property
    def requests(self) -> list[dict]:
        """The parsed bodies of every chat-completion request, in arrival order."""
        return [s.body for s in self.chat_requests]

    @property
    def remaining(self) -> int:
        """Scripted replies not yet given."""
        with self._lock:
            return len(self._script)

    def add_replies(self, *replies: Any) -> None:
        with self._lock:
            self._script.extend(_normalize(r) for r in replies)

    # ---- used by the handler
    def _record(self, seen: Seen) -> None:
        with self._lock:
            self.seen.append(seen)

    def _next_reply(self, body: dict) -> tuple[dict, bool]:
        scripted = False
        with self._lock:
            if self._script and self.takes_script(body):
                reply, scripted = self._script.pop(0), True
        if not scripted:
            default = self.default_reply(body) if callable(self.default_reply) else self.default_reply
            reply = _normalize(default)
        return reply, scripted

    def _usage(self, body: dict, reply: dict) -> dict:
        prompt = max(1, len(json.dumps(body.get("messages") or [])) // 4)
        completion = max(1, len(json.dumps(reply.get("tool_calls") or []) + (reply.get("content") or "")) // 4)
        usage = {"prompt_tokens": prompt, "completion_tokens": completion,
                 "total_tokens": prompt + completion}
        if reply.get("usage"):
            usage.update(reply["usage"])
            if "total_tokens" not in reply["usage"]:
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return usage

    def _completion_id(self) -> str:
        return f"chatcmpl-stub{next(self._ids)}"


class _Handler(BaseHTTPRequestHandler):
    owner: OpenAIStub
    # HTTP/1.0: one request per connection, and an SSE body simply ends at close.
    protocol_version = "HTTP/1.0"
    server_version = "OpenAIStub/1"

    def log_message(self, format, *args):  # noqa: A002 - keep test output quiet
        pass

    # ---- plumbing
    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _send_json(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _seen(self, body: Any) -> Seen:
        seen = Seen(self.command, self.path.split("?", 1)[0], dict(self.headers.items()), body)
        self.owner._record(seen)
        return seen

    def _not_found(self) -> None:
        self._send_json(404, {"error": {"message": f"stub: no route {self.command} {self.path}",
                                        "type": "invalid_request_error", "code": "not_found"}})

    # ---- routes
    def do_GET(self):  # noqa: N802
        seen = self._seen(None)
        stub = self.owner
        model = {"id": stub.model, "object": "model", "created": 0, "owned_by": "openai-stub",
                 "context_length": stub.context_length, "max_model_len": stub.context_length}
        path = seen.path.rstrip("/")
        if path == "/v1/models":
            self._send_json(200, {"object": "list", "data": [model]})
        elif path == f"/v1/models/{stub.model}":
            self._send_json(200, model)
        else:
            self._not_found()

    def do_POST(self):  # noqa: N802
        body = self._read_body()
        seen = self._seen(body)
        if seen.path.rstrip("/") != CHAT_PATH:
            self._not_found()
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._send_json(400, {"error": {"message": "stub: body needs a messages list",
                                            "type": "invalid_request_error"}})
            return
        stub = self.owner
        reply, scripted = stub._next_reply(body)
        seen.answered_with, seen.scripted = reply, scripted
        if body.get("stream"):
            self._stream(body, reply)
        else:
            self._whole(body, reply)

    def _message(self, reply: dict) -> dict:
        message: dict = {"role": "assistant", "content": reply.get("content")}
        if reply.get("tool_calls"):
            message["tool_calls"] = reply["tool_calls"]
        return message

    @staticmethod
    def _finish(reply: dict) -> str:
        return "tool_calls" if reply.get("tool_calls") else "stop"

    def _whole(self, body: dict, reply: dict) -> None:
        stub = self.owner
        self._send_json(200, {
            "id": stub._completion_id(), "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model") or stub.model,
            "choices": [{"index": 0, "message": self._message(reply), "logprobs": None,
                         "finish_reason": self._finish(reply)}],
            "usage": stub._usage(body, reply),
        })

    def _stream(self, body: dict, reply: dict) -> None:
        stub = self.owner
        base = {"id": stub._completion_id(), "object": "chat.completion.chunk",
                "created": int(time.time()), "model": body.get("model") or stub.model}
        size = stub.chunk_size

        def chunk(delta: dict, finish: str | None = None) -> dict:
            return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                         "finish_reason": finish}]}

        events = [chunk({"role": "assistant", "content": ""})]
        content = reply.get("content") or ""
        for i in range(0, len(content), size):
            events.append(chunk({"content": content[i:i + size]}))
        for index, tc in enumerate(reply.get("tool_calls") or []):
            args = tc["function"]["arguments"]
            events.append(chunk({"tool_calls": [{"index": index, "id": tc["id"], "type": "function",
                                                 "function": {"name": tc["function"]["name"],
                                                              "arguments": ""}}]}))
            for i in range(0, len(args), size):
                events.append(chunk({"tool_calls": [{"index": index,
                                                     "function": {"arguments": args[i:i + size]}}]}))
        events.append(chunk({}, self._finish(reply)))
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append({**base, "choices": [], "usage": stub._usage(body, reply)})

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        try:
            for event in events:
                self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (interrupt, timeout): nothing left to tell it
