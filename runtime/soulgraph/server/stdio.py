"""The stdio transport: the MCP SDK's, with an answer for every line it cannot use.

The SDK's stdio server (mcp 2.3, `mcp/server/stdio.py`) decodes stdin with
`errors="replace"` and, when a line is not a JSON-RPC message, hands the parse exception to
the session, which logs it and answers nothing: a client that sent garbage, a lone surrogate
escape (`"\\ud800"`) or JSON nested 1,000 deep waits for its own timeout, and invalid UTF-8
arrives as U+FFFD. Here each such line gets the JSON-RPC error the protocol names:

- `-32700 Parse error` (id null): not UTF-8, not JSON, a lone surrogate, nesting too deep;
- `-32600 Invalid Request` (the request's id when it has a usable one): JSON, but not a
  JSON-RPC message.

Everything else is the SDK's own behaviour: one message per line, UTF-8 out, and fd 0 / fd 1
moved out of the way while serving (stray prints from a library go to stderr, never onto
the wire). docs/soul-graph.md reports the SDK behaviour.
"""

from __future__ import annotations

import os
import sys
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

PARSE_ERROR, INVALID_REQUEST = -32700, -32600


def classify(line: bytes) -> tuple[Any, types.JSONRPCError | None]:
    """(message, None) for a usable line, (None, the error to answer) for any other."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, _error(PARSE_ERROR, f"Parse error: not UTF-8 (byte {exc.start})")
    try:
        return types.jsonrpc_message_adapter.validate_json(text, by_name=False), None
    except Exception as exc:  # a pydantic ValidationError: say which kind of problem
        errors = exc.errors() if hasattr(exc, "errors") else []
        first = errors[0] if errors else {"type": "", "msg": str(exc)}
        if first.get("type") == "json_invalid":
            reason = str(first.get("ctx", {}).get("error") or first.get("msg"))
            return None, _error(PARSE_ERROR, f"Parse error: {reason}")
        return None, _error(INVALID_REQUEST, f"Invalid Request: not a JSON-RPC 2.0 message ({_where(first)})",
                            _request_id(text))


def _where(error: dict[str, Any]) -> str:
    location = ".".join(str(part) for part in error.get("loc", ()) if not str(part).startswith("JSONRPC"))
    return f"{location}: {error.get('msg')}" if location else str(error.get("msg"))


def _request_id(text: str) -> str | int | None:
    import json

    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    found = data.get("id") if isinstance(data, dict) else None
    return found if isinstance(found, (str, int)) and not isinstance(found, bool) else None


def _error(code: int, message: str, request_id: str | int | None = None) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


def _claim(fd: int, replacement: int) -> int:
    """A private duplicate of `fd` for the wire; `fd` itself now points at `replacement`."""
    private = os.dup(fd)
    os.set_inheritable(private, False)
    os.dup2(replacement, fd)
    return private


@asynccontextmanager
async def stdio_transport():
    """(read_stream, write_stream) for the low-level server, over this process's stdin/stdout."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        in_fd, out_fd = _claim(0, devnull), _claim(1, 2)
    finally:
        os.close(devnull)
    stdin = anyio.wrap_file(os.fdopen(in_fd, "rb", buffering=0))
    stdout = anyio.wrap_file(os.fdopen(out_fd, "wb"))
    read_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, write_reader = create_context_streams[SessionMessage](0)

    async def reader() -> None:
        async with read_writer:
            buffered = b""
            while True:
                chunk = await stdin.read(1 << 16)
                if not chunk:
                    break
                buffered += chunk
                *lines, buffered = buffered.split(b"\n")
                for line in lines:
                    if line.strip():
                        await _deliver(line)
            if buffered.strip():
                await _deliver(buffered)

    async def _deliver(line: bytes) -> None:
        message, error = classify(line)
        if error is not None:
            await write_stream.send(SessionMessage(error))
        else:
            await read_writer.send(SessionMessage(message))

    async def writer() -> None:
        async with write_reader:
            async for session_message in write_reader:
                data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await stdout.write(data.encode("utf-8") + b"\n")
                await stdout.flush()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(reader)
            group.start_soon(writer)
            yield read_stream, write_stream
            group.cancel_scope.cancel()
    finally:
        for fd, private in ((0, in_fd), (1, out_fd)):
            try:
                os.dup2(private, fd)  # the wire back where it was
            except OSError:
                print(f"soulgraph.mcp: could not restore fd {fd}", file=sys.stderr)


async def serve(server: Any) -> None:
    """Run an MCPServer on stdio through this transport (as its own run("stdio") does with the SDK's)."""
    lowlevel = server._lowlevel_server  # what MCPServer.run_stdio_async runs, too
    async with stdio_transport() as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
