"""Talk to `python -m soulgraph.mcp` as a real MCP client does: the SDK's stdio client."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any, Awaitable, Callable

from mcp import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment


def server_params(soul_file: Path, python: str = sys.executable, extra_args: list[str] = (),
                  extra_env: dict[str, str] | None = None) -> StdioServerParameters:
    env = {**get_default_environment(), **extra_env} if extra_env else None  # None: the SDK's default
    return StdioServerParameters(command=python, args=["-m", "soulgraph.mcp", "--soul-file", str(soul_file), *extra_args],
                                 env=env)


class Session:
    """A connected client with helpers that unpack tool results."""

    def __init__(self, client: Client):
        self.client = client

    async def tool_names(self) -> list[str]:
        return [tool.name for tool in (await self.client.list_tools()).tools]

    async def call(self, name: str, **arguments: Any) -> dict[str, Any]:
        """Call a tool that must succeed; returns its structured result."""
        result = await self.client.call_tool(name, arguments)
        assert not result.is_error, f"{name}({arguments}) failed: {result.content[0].text}"
        # The text content is the same JSON, for clients that ignore structured output.
        assert json.loads(result.content[0].text) == result.structured_content
        return result.structured_content

    async def refused(self, name: str, **arguments: Any) -> str:
        """Call a tool that must be refused; returns the error text the agent reads."""
        result = await self.client.call_tool(name, arguments)
        assert result.is_error, f"{name}({arguments}) was accepted: {result.structured_content}"
        return result.content[0].text


def with_server(soul_file: Path, scenario: Callable[[Session], Awaitable[Any]], extra_args: list[str] = (),
                extra_env: dict[str, str] | None = None) -> Any:
    """Start the server as a subprocess (with `extra_args`, and `extra_env` added to the SDK's
    default environment), run `scenario` against it, stop it."""

    async def main() -> Any:
        async with Client(server_params(soul_file, extra_args=list(extra_args), extra_env=extra_env)) as client:
            return await scenario(Session(client))

    try:
        return asyncio.run(main())
    except BaseExceptionGroup as group:
        # The SDK's task groups wrap a failing assertion twice; show the assertion itself.
        while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
            group = group.exceptions[0]
        raise group from None
