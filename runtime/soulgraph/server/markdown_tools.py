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
takes it out of both: `copies` finds where a memory's text was written (this toolset's
`markdown:<path>` source, or Hermes' memory tool mirrored by the provider), and `scrub`
removes exactly that entry from each file.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Iterable

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
from soulgraph.store.atomic import write_atomically

SoulPath = Annotated[str, Field(max_length=1_000, description="Path to SOUL.md (relative to the agent's home)")]
MemoryPath = Annotated[str, Field(max_length=1_000, description="Path to MEMORY.md (relative to the agent's home; "
                                  "in a Hermes home, MEMORY.md is memories/MEMORY.md)")]
Provider = Annotated[str, Field(max_length=40, description="LLM provider: anthropic, or openai for any OpenAI-compatible endpoint")]
Note = Annotated[str, Field(min_length=1, max_length=10_000, description="Text to append to MEMORY.md")]

WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)


# Who put a memory's text into a markdown file, besides the graph: the writers of this
# toolset (source `markdown:<path as given>`), and Hermes' own memory tool as the provider
# mirrors it (hermes/memory_service.py: source `hermes:memory_tool:<target>`).
MARKDOWN_WRITERS = ("tool:soul_remember", "tool:soul_ask")
MARKDOWN_SOURCE = "markdown:"
HERMES_MEMORY_FILES = {"hermes:memory_tool:memory": "memories/MEMORY.md", "hermes:memory_tool:user": "memories/USER.md"}


def error(message: str) -> dict[str, Any]:
    return {"status": "error", "message": message}


def copies(node: Any) -> list[tuple[str, str]]:
    """(file as its writer named it, text) for each copy of `node`'s text a markdown write
    made: its own, and those of the memories merged into it (they keep their source)."""
    found = []
    if node.writer in MARKDOWN_WRITERS and node.source.startswith(MARKDOWN_SOURCE):
        found.append((node.source[len(MARKDOWN_SOURCE):], node.content))
    elif node.source in HERMES_MEMORY_FILES:
        found.append((HERMES_MEMORY_FILES[node.source], node.content))
    for merged in node.metadata.get("merged_from", ()):
        source, content = str(merged.get("source") or ""), merged.get("content")
        if not isinstance(content, str):
            continue
        if source.startswith(MARKDOWN_SOURCE):
            found.append((source[len(MARKDOWN_SOURCE):], content))
        elif source in HERMES_MEMORY_FILES:
            found.append((HERMES_MEMORY_FILES[source], content))
    return [(path, text.strip()) for path, text in found if text.strip()]


@dataclass
class Scrubbed:
    """What a forget did to the markdown files: the files it rewrote without the text,
    and the ones that still hold it inside another entry (left for a person to edit)."""

    files: list[str]
    inside_other_entries: list[str]


def _bullet(note: str) -> str:
    """The block `files.append` writes for `note` in a plain markdown file."""
    return "\n".join(("- " if i == 0 else "  ") + line for i, line in enumerate(note.splitlines())) + "\n"


def _without_block(text: str, block: str) -> str:
    """`text` without each copy of `block` that stands on lines of its own (a bullet that
    goes on in indented lines is another note)."""
    kept, start, at = [], 0, text.find(block)
    while at >= 0:
        end = at + len(block)
        if (at == 0 or text[at - 1] == "\n") and not text.startswith("  ", end):
            kept.append(text[start:at])
            start = end
            at = text.find(block, end)
        else:
            at = text.find(block, at + 1)
    kept.append(text[start:])
    return "".join(kept)


def _read(path: Path, note: str, shown: str) -> str | None:
    """The file's text (None: no file, or bytes that do not hold `note`). MarkdownFileError
    when it holds the text but cannot be read as text to take it out."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise files.MarkdownFileError(f"{shown} cannot be read ({exc.strerror}), so the note in it cannot "
                                      "be removed") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if note.encode("utf-8") in raw:
            raise files.MarkdownFileError(f"{shown} still holds the text, and it is not UTF-8 text (byte "
                                          f"{exc.start}), so it is not rewritten") from None
        return None


def _taken_out(text: str, hermes: bool, note: str) -> str:
    """`text` without `note`'s entry: a whole Hermes entry, or the bullet `files.append`
    wrote; never a part of another entry."""
    if hermes:
        held = files.entries(text)
        kept = [entry for entry in held if entry != note]
        return files.SEPARATOR.join(kept) if len(kept) < len(held) else text
    return _without_block(text, _bullet(note))


def scrub_forgotten(folder: files.Folder, graph: Any, written: Iterable[tuple[str, str]]) -> Scrubbed:
    """`scrub` the entries forgotten memories wrote (`copies` of each, taken before the
    forget), except an entry a memory still in `graph` stands for too."""
    written = list(written)
    held = {(path, text) for path, text in written
            if any(other.content.strip() == text and (path, text) in copies(other) for other in graph.nodes.values())}
    return scrub(folder, [copy for copy in written if copy not in held])


def scrub(folder: files.Folder, wanted: Iterable[tuple[str, str]]) -> Scrubbed:
    """Take each (file, text) entry out of its file, under Hermes' lock, each file replaced
    atomically with its mode kept. Every file is read and checked before any is written, so
    a file that cannot be read (MarkdownFileError, naming it) leaves all of them as they were."""
    by_file: dict[Path, tuple[str, list[str]]] = {}
    for given, text in wanted:
        path = folder.resolve(given, "memory_path")
        root = folder.root.resolve()
        shown = str(path.relative_to(root)) if root in path.parents else str(path)  # memories/MEMORY.md
        by_file.setdefault(path, (shown, []))[1].append(text)
    done = Scrubbed([], [])
    with contextlib.ExitStack() as locks:
        plans = []
        for path in sorted(by_file):  # one order for every forget: no two wait on each other
            shown, notes = by_file[path]
            locks.enter_context(files.locked(path))
            text = None
            for note in notes:
                text = _read(path, note, shown) if text is None else text
            if text is None:
                continue
            hermes = files.is_hermes_file(path, folder, text)
            new = text
            for note in notes:
                new = _taken_out(new, hermes, note)
            if new != text:
                plans.append((path, shown, new))
            if any(note in new for note in notes):
                done.inside_other_entries.append(shown)
        for path, shown, new in plans:
            try:
                write_atomically(path, new.encode("utf-8"), default_mode=0o600)  # an existing file keeps its mode
            except OSError as exc:
                raise files.MarkdownFileError(f"{shown} still holds the text: it cannot be rewritten "
                                              f"({exc.strerror or exc})") from None
            done.files.append(shown)
    return done


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
