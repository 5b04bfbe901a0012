"""A local stand-in for Anthropic's Messages API on 127.0.0.1, for soul_ask's tests.

`POST /v1/messages` answers a scripted text in the API's shape (what the `anthropic` SDK
parses); every request body and its headers are recorded. `status` makes every POST fail
with that HTTP status (any path, so the openai client's calls fail the same way), `delay`
holds every answer that many seconds (a provider that does not answer in time). It proves
the wire shape and our handling, not a real model.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class MessagesStub:
    def __init__(self, reply: str = "Hello from the stub.", *, status: int = 200, delay: float = 0.0) -> None:
        self.reply, self.status, self.delay = reply, status, delay
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._server: ThreadingHTTPServer | None = None

    def __enter__(self) -> "MessagesStub":
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format, *args):  # noqa: A002 - quiet tests
                pass

            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                stub.requests.append(body)
                stub.headers.append({k.lower(): v for k, v in self.headers.items()})
                if stub.delay:
                    time.sleep(stub.delay)
                if stub.status != 200:
                    payload = {"type": "error", "error": {"type": "api_error", "message": "stub failure"}}
                    return self._send(stub.status, payload)
                self._send(200, {"id": "msg_stub", "type": "message", "role": "assistant",
                                 "model": body.get("model", "stub"),
                                 "content": [{"type": "text", "text": stub.reply}],
                                 "stop_reason": "end_turn", "stop_sequence": None,
                                 "usage": {"input_tokens": 10, "output_tokens": 5}})

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"
