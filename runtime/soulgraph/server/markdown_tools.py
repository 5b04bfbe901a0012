"""The `markdown` toolset (seed 001): an agent's SOUL.md and MEMORY.md (`--toolsets graph,markdown`).

    soul_status(soul_path, memory_path)                   sizes and existence; entries and budget for Hermes' files
    soul_init(soul_path, memory_path, agent_name, description)   default files, never overwritten
    soul_ask(question, soul_path, memory_path, provider, model, base_url, remember)
                                                          SOUL.md as the system prompt, MEMORY.md as context (memory/ask.py)
    soul_remember(note, soul_path, memory_path, provider) a new entry in MEMORY.md, and the same note in the graph
    soul_reset(soul_path, memory_path, provider)          the in-session conversation cleared

Answers are the seed's dicts: `{"status": "success", …}`, or `{"status": "error", "message": …}`
with nothing changed. Paths resolve against the server's folder (memory/markdown_files.py).
soul_ask's prompt leaves out every line of SOUL.md and MEMORY.md that holds the text of a
flagged memory (memory/flagged.py: it reads like prompt injection).

A note written here lives in two places, so a hard forget (`soul_forget`, the memory toolset)
takes it out of both (memory/markdown_copies.py).
"""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from soulgraph.memory import ask as asking, flagged, guard, markdown_files as files
from soulgraph.memory.write import RefusedMemory, remember
from soulgraph.server import shapes
from soulgraph.server.answers import tool_registrar
from soulgraph.server.toolsets import MARKDOWN_TOOLS as TOOL_NAMES  # noqa: F401
from soulgraph.store import SoulFileError

SoulPath = Annotated[str, Field(max_length=1_000, description="Path to SOUL.md (relative to the agent's home)")]
MemoryPath = Annotated[str, Field(max_length=1_000, description="Path to MEMORY.md (relative to the agent's home; "
                                  "in a Hermes home, MEMORY.md is memories/MEMORY.md)")]
Provider = Annotated[str, Field(max_length=40, description="LLM provider: anthropic, or openai for any OpenAI-compatible endpoint")]
Note = Annotated[str, Field(min_length=1, max_length=10_000, description="Text to append to MEMORY.md")]

WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def error(message: str) -> dict[str, Any]:
    return {"status": "error", "message": message}


def register(server: MCPServer, tools: Any, folder: files.Folder, ask_timeout: float = asking.DEFAULT_TIMEOUT) -> None:
    """Add the markdown tools; `tools` is the graph toolset's SoulTools (for the graph writes),
    `folder` where relative paths resolve, `ask_timeout` soul_ask's deadline in seconds."""
    sessions: dict[tuple[str, str], list[dict[str, str]]] = {}  # in-session history, per file pair
    tool = tool_registrar(server)

    def remember_note(note: str, memory_path: str, writer: str) -> tuple[Any, files.Appended]:
        """The note in the graph and in MEMORY.md, or in neither (raises)."""
        if tools.reader.scope:
            # The markdown files are the agent's, read into every user's session.
            raise files.MarkdownFileError(f"{memory_path} is read by every user of the agent, and this server serves "
                                          f"{tools.reader.scope} only: it does not write the markdown files")
        memory = folder.resolve(memory_path, "memory_path")
        with tools.soul.change() as graph:
            # Scanned and added first: a refused note reaches neither file. The markdown
            # write inside the change: if it fails, the graph change is taken back.
            written = remember(graph, note.strip(), ["memory"], writer=writer, kind="note",
                               source=f"markdown:{memory_path}", where=writer.removeprefix("tool:"))
            appended = files.append(memory, folder, note, "memory_path")
        return written, appended

    @tool(READ)
    async def soul_status(soul_path: SoulPath = "SOUL.md", memory_path: MemoryPath = "MEMORY.md") -> shapes.MarkdownAnswer:
        """File statistics for SOUL.md and MEMORY.md (for Hermes' memory files also entries,
        characters used and the budget left)."""
        try:
            soul = folder.resolve(soul_path, "soul_path")
            memory = folder.resolve(memory_path, "memory_path")
            soul_info = files.status(soul, folder, "soul_path")
            memory_info = files.status(memory, folder, "memory_path")
        except files.MarkdownFileError as exc:
            return error(str(exc))
        answer = {"status": "success", "soul_path": soul_path, "memory_path": memory_path,
                  "soul_exists": soul_info["exists"], "soul_size_bytes": soul_info["size_bytes"],
                  "memory_exists": memory_info["exists"], "memory_size_bytes": memory_info["size_bytes"],
                  "memory_format": memory_info["format"]}
        for key in ("entries", "chars_used", "budget_chars", "remaining_chars"):
            if key in memory_info:
                answer[f"memory_{key}"] = memory_info[key]
        return answer

    @tool(WRITE)
    async def soul_init(soul_path: SoulPath = "SOUL.md", memory_path: MemoryPath = "MEMORY.md",
                        agent_name: Annotated[str, Field(max_length=200, description="Agent name in SOUL.md header")] = "Assistant",
                        description: Annotated[str, Field(max_length=20_000, description="System prompt content")] =
                        "A helpful AI assistant with a persistent memory.") -> shapes.MarkdownAnswer:
        """Create default SOUL.md and MEMORY.md for a new agent. Never overwrites a file."""
        try:  # SOUL.md is the agent's system prompt: its text passes the scanner as a memory's does
            found = guard.inspect(iter([("agent_name", agent_name), ("description", description)]), "soul_init")
        except RefusedMemory as exc:
            return error(str(exc))
        if found:
            return error(f"soul_init: {', '.join(found)}: reads like prompt injection "
                         f"({', '.join(sorted({r for rules in found.values() for r in rules}))}); nothing was written")
        try:
            soul = folder.resolve(soul_path, "soul_path")
            memory = folder.resolve(memory_path, "memory_path")
            created, skipped = [], []
            hermes = files.is_hermes_file(memory, folder)
            for path, given, text in ((soul, soul_path, files.DEFAULT_SOUL.format(name=agent_name.strip() or "Assistant",
                                                                                  description=description.strip())),
                                      (memory, memory_path, "" if hermes else files.DEFAULT_MEMORY)):
                (created if files.create(path, text) else skipped).append(given)
        except (files.MarkdownFileError, OSError) as exc:
            return error(str(exc))
        return {"status": "success", "created": created, "skipped": skipped}

    @tool(WRITE)
    async def soul_remember(note: Note, soul_path: SoulPath = "SOUL.md", memory_path: MemoryPath = "MEMORY.md",
                            provider: Provider = "anthropic") -> shapes.MarkdownAnswer:
        """Append a note to MEMORY.md without an LLM round trip; the same note becomes a memory in
        the soul graph, so both agree. Hermes' memory file keeps its format and budget."""
        try:
            written, appended = remember_note(note, memory_path, "tool:soul_remember")
        except (RefusedMemory, files.MarkdownFileError, SoulFileError, OSError) as exc:
            return error(str(exc))
        answer = {"status": "success", "memory_path": memory_path, "node_id": written.node.id,
                  "memory_format": appended.format}
        if appended.entries is not None:
            answer["memory_entries"] = appended.entries
        if appended.remaining_chars is not None:
            answer["memory_remaining_chars"] = appended.remaining_chars
        if written.warnings:
            answer["warnings"] = written.warnings
        return answer

    @tool(WRITE)
    async def soul_reset(soul_path: SoulPath = "SOUL.md", memory_path: MemoryPath = "MEMORY.md",
                         provider: Provider = "anthropic") -> shapes.MarkdownAnswer:
        """Clear the in-session conversation history soul_ask keeps. MEMORY.md is not modified."""
        sessions.pop((soul_path, memory_path), None)
        return {"status": "success", "note": "In-session history cleared. MEMORY.md is unchanged."}

    @tool(ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                             idempotent_hint=False, open_world_hint=True))
    async def soul_ask(question: Annotated[str, Field(min_length=1, max_length=20_000, description="Question or statement to send")],
                       soul_path: SoulPath = "SOUL.md", memory_path: MemoryPath = "MEMORY.md",
                       provider: Provider = "anthropic",
                       model: Annotated[str | None, Field(max_length=200, description="Model override")] = None,
                       base_url: Annotated[str | None, Field(max_length=500, description="Endpoint for openai-compatible")] = None,
                       remember: Annotated[bool, Field(description="Persist the exchange to MEMORY.md")] = True) -> shapes.MarkdownAnswer:
        """Ask a persistent markdown-memory agent: SOUL.md is its system prompt, MEMORY.md its
        context, this session's earlier exchanges its history; with remember, the exchange is
        appended to MEMORY.md (and the graph)."""
        try:
            soul = folder.resolve(soul_path, "soul_path")
            memory = folder.resolve(memory_path, "memory_path")
            soul_text = files.read_text(soul, "soul_path")
            if soul_text is None:
                return error(f"soul_path: {soul_path} does not exist; soul_init creates a default one")
            memory_text = files.read_text(memory, "memory_path") or ""
        except files.MarkdownFileError as exc:
            return error(str(exc))
        try:
            graph = tools.soul.graph()
        except SoulFileError as exc:
            return error(str(exc))
        needles = flagged.lines(graph, tools.soul.seq)
        soul_text, memory_text = (flagged.without_lines(text, needles)[0] for text in (soul_text, memory_text))
        if files.is_hermes_file(memory, folder, memory_text):
            memory_text = "\n".join(f"- {entry}" for entry in files.entries(memory_text))
        history = sessions.setdefault((soul_path, memory_path), [])
        built = asking.prompt(soul_text, memory_text, history, question)
        try:
            response = await anyio.to_thread.run_sync(
                lambda: asking.ask(provider, built, model=model, base_url=base_url, timeout=ask_timeout))
        except asking.AskError as exc:
            return error(str(exc))
        history += [{"role": "user", "content": question}, {"role": "assistant", "content": response}]
        answer: dict[str, Any] = {"status": "success", "response": response, "remembered": False}
        if remember:
            try:
                remember_note(f"Q: {question.strip()}\nA: {response.strip()}", memory_path, "tool:soul_ask")
                answer["remembered"] = True
            except (RefusedMemory, files.MarkdownFileError, SoulFileError, OSError) as exc:
                answer["note"] = f"not remembered: {exc}"
        return answer
