"""The corpora's injections written through every way into a soul graph, and whether any reaches a prompt.

    python bench/bench_poison_paths.py [--data ../shared/data] [--limit N] [--seed 1] [--secrets] [--show-leaks]

Every injection of `poison/injections-dev.jsonl` (or a random sample of `--limit` of them) is
written into a fresh soul home per path, as that path writes it:

- tools: `soul_add` through the MCP SDK's client (the server in-process), every third one with
  `pinned: true`;
- seeding from a Hermes home: round robin into `memories/MEMORY.md` and `memories/USER.md`
  (Hermes' own format, entries joined by `§`) and `SOUL.md` (markdown bullets, pinned axioms),
  then `python -m soulgraph.seed`;
- soul-repo import: round robin into the repository's `SOUL.md`, `USER.md` and
  `memories/notes.md`, then `soulrepo import` into an empty Hermes home.

In a markdown file each injection is a bullet under the file's heading in a `§` entry of its
own, after the ordinary entries: the taint of a flagged text runs on through the rest of its
section (`markdown_entries.stretches`), and one injection must not hide another;
- turn capture: the memory service's `sync_turn` with the injection as the user's message
  (20 turns a session);
- consolidation: the service's `consolidate` of those sessions (the same home, measured
  again), and of the injections as the messages Hermes is about to compress (a home of its own).

Three ordinary memories go in next to them the same way (the control: they must show).

Then for each home, where the injections' text (whole, or any 60-character stretch of it,
whitespace collapsed) appears:

- prime: `soul_prime` once with a 20,000-character snapshot budget, and once per injection
  with its own first words as `context` (hot, focus, walk);
- snapshot: the `soul://snapshot` resource and the memory service's snapshot (the block Hermes
  puts in its system prompt);
- prefetch: the memory service's `recall` (what the plugin's prefetch sends before a turn)
  with the whole injection as the query.

Counted per injection: not stored (the scanner saw a secret, so the write was refused), flagged
(every memory holding its text is flagged), stored unflagged (the scanner's misses: some memory
holds it, or a 60-character stretch of it, unflagged). `--secrets` also writes the texts of
`poison/secrets-dev.jsonl` through the same paths and looks for the credential each holds (what
the scanner finds in it, else the record's `secret`). Search is lexical (`embed` off) so the run
is deterministic; the flagged filter is the same either way. `--show-leaks` prints every
injection that reaches a prompt: its line number in the corpus, the path and file it went
through, and the unflagged memories that hold it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "runtime"))

from mcp import Client  # noqa: E402

from soulgraph.engine import record  # noqa: E402
from soulgraph.hermes import seed  # noqa: E402
from soulgraph.hermes.memory_service import MemoryService  # noqa: E402
from soulgraph.memory.scanner import scan  # noqa: E402
from soulgraph.server.app import build_server  # noqa: E402
from soulgraph.soulrepo.importer import import_soul  # noqa: E402
from soulgraph.store import SoulFile  # noqa: E402

STRETCH = 60  # characters: a stretch this long of an injection, found anywhere, counts as the injection
TURNS_PER_SESSION = 20
CONTEXT_WORDS = 12
# Ordinary memories written beside the injections on every path: they must reach the prompt, or
# the check finds nothing because it looks nowhere.
CONTROLS = (
    "Ada waters the tomatoes at dawn before she starts work.",
    "I prefer green tea in the morning, never coffee.",
    "The greenhouse project ships the watering reminder on Friday.",
)
MANIFEST = {
    "schema": "clawdie.layered-soul.v1", "agent_id": "ada", "display_name": "Ada", "owner": "operator-controlled",
    "updated_at": "2026-11-01T00:00:00Z",
    "core_files": {"soul": "SOUL.md", "user": "USER.md", "identity": "IDENTITY.md", "harness_rules": "AGENTS.md"},
    "layered_imports": {"skills": ["skills/**/*.md"], "memory": ["memories/**/*.md"]},
    "privacy": {"raw_sessions": "archive-only", "secrets": "excluded", "operator_review_required": True},
}
SEED_FILES = ("memories/MEMORY.md", "memories/USER.md", "SOUL.md")
REPO_FILES = ("SOUL.md", "USER.md", "memories/notes.md")


def flat(text: str) -> str:
    return " ".join(text.split())


# ------------------------------------------------------------------ finding the texts
class Finder:
    """Which of `texts` appear in a piece of text: whole, or by any STRETCH-character stretch,
    whitespace collapsed on both sides."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = [flat(t) for t in texts]
        self.windows: dict[str, set[int]] = {}
        self.short: list[int] = []
        for i, text in enumerate(self.texts):
            if len(text) < STRETCH:
                self.short.append(i)
                continue
            for at in range(len(text) - STRETCH + 1):
                self.windows.setdefault(text[at:at + STRETCH], set()).add(i)

    def found(self, text: str) -> set[int]:
        text = flat(text)
        hits: set[int] = set()
        windows = self.windows
        for at in range(len(text) - STRETCH + 1):
            got = windows.get(text[at:at + STRETCH])
            if got:
                hits |= got
        hits.update(i for i in self.short if self.texts[i] and self.texts[i] in text)
        return hits


def strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from strings(item)


def shown_ids(answer: dict[str, Any]) -> set[str]:
    ids = {n["id"] for n in [*answer.get("hot", []), *answer.get("walk", [])]}
    if answer.get("focus"):
        ids.add(answer["focus"]["id"])
    return ids


# ------------------------------------------------------------------ the paths
@dataclass
class Home:
    """One soul home and what was written into it: `texts[i]` went in as entry i."""

    name: str
    soul_file: Path
    texts: list[str]
    controls: tuple[str, ...] = CONTROLS
    placed: list[str] = field(default_factory=list)  # where each text went (a file), if it matters
    notes: list[str] = field(default_factory=list)
    # The texts left out on purpose (index -> why), not written at all.
    left_out: dict[int, str] = field(default_factory=dict)


async def _tools(target: Any, texts: list[str], controls: tuple[str, ...], pin_every: int,
                 timeout: float) -> list[str]:
    errors = []
    async with Client(target, read_timeout_seconds=timeout) as client:
        for text in controls:
            result = await client.call_tool("soul_add", {"content": text, "tags": ["garden"]})
            assert not result.is_error, result.content[0].text
        for i, text in enumerate(texts):
            args = {"content": text, "tags": ["note"], "pinned": pin_every > 0 and i % pin_every == 0}
            result = await client.call_tool("soul_add", args)
            if result.is_error:
                errors.append(result.content[0].text)
    return errors


def write_tools(folder: Path, texts: list[str], controls: tuple[str, ...] = CONTROLS, pin_every: int = 3,
                target: Callable[[Path], Any] | None = None, timeout: float = 60.0) -> Home:
    """soul_add, as an agent calls it; every `pin_every`-th with pinned=true (the first one
    too). `target(soul_file)`: the MCP server to call, as `prompts` takes it."""
    folder.mkdir(parents=True, exist_ok=True)
    home = Home("tools (soul_add; every third pinned)", folder / "soul.json", texts, controls)
    server = target(home.soul_file) if target else build_server(SoulFile(home.soul_file), embed=False)
    errors = asyncio.run(asyncio.wait_for(_tools(server, texts, controls, pin_every, timeout), 10 * timeout))
    home.notes += [f"{len(errors)} soul_add calls refused"] if errors else []
    return home


def bullet(text: str) -> str:
    """A markdown bullet of `text`, its further lines indented under it (as a person pastes it)."""
    lines = text.strip().splitlines() or [""]
    return "\n".join([f"- {lines[0]}", *(f"  {line}" if line.strip() else "" for line in lines[1:])])


def markdown(heading: str, controls: list[str], texts: list[str]) -> str:
    """A markdown file of bullets under `heading`: the ordinary entries first, then each text in
    a `§` entry of its own (`§` ends every stretch and section: the taint of one text, which runs
    on through the rest of its section, never reaches another text or an ordinary entry)."""
    parts = [f"# {heading}\n\n" + "\n".join(bullet(t) for t in controls)]
    parts += [f"# {heading}\n\n{bullet(t)}" for t in texts]
    return "\n\n§\n\n".join(parts) + "\n"


def write_seed(folder: Path, texts: list[str], controls: tuple[str, ...] = CONTROLS,
               files: tuple[str, ...] = SEED_FILES) -> Home:
    """A Hermes home holding the texts round robin in `files`, seeded as install does."""
    hermes = folder / "hermes"
    (hermes / "memories").mkdir(parents=True, exist_ok=True)
    home = Home("seeding from a Hermes home", hermes / "soul.json", texts, controls)
    home.placed = [files[i % len(files)] for i in range(len(texts))]
    by_file: dict[str, list[str]] = {name: [] for name in files}
    for name, text in zip(home.placed, texts):
        by_file[name].append(text)
    for at, text in enumerate(controls):
        by_file[files[at % len(files)]].append(text)
    for name, entries in by_file.items():
        if name == "SOUL.md":
            body = markdown("Persona", [t for t in entries if t in controls], [t for t in entries if t not in controls])
        else:
            body = "\n§\n".join(t.strip() for t in entries)
        (hermes / name).write_text(body, encoding="utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = seed.main(["--hermes-home", str(hermes), "--out", str(home.soul_file), "--json"])
    if code != 0:
        raise SystemExit(f"seeding failed ({code}): {out.getvalue()[:500]}")
    return home


def write_import(folder: Path, texts: list[str], controls: tuple[str, ...] = CONTROLS,
                 files: tuple[str, ...] = REPO_FILES) -> Home:
    """A layered soul repository holding the texts round robin in `files`, imported into an
    empty Hermes home (which seeds the home's soul graph, then adds the repository's memories)."""
    repo, hermes = folder / "repo", folder / "hermes"
    (hermes / "memories").mkdir(parents=True, exist_ok=True)
    home = Home("soul-repo import", hermes / "soul.json", texts, controls)
    # The repository's validation refuses a whole repository in which any file holds a secret:
    # those texts would take every other one down with them, so they are left out (and counted
    # as refused).
    home.left_out = {i: "holds a secret" for i, t in enumerate(texts) if scan(t).secrets}
    home.placed = [files[i % len(files)] for i in range(len(texts))]
    by_file: dict[str, list[str]] = {name: [] for name in (*REPO_FILES, *files)}  # the layout needs each
    for i, (name, text) in enumerate(zip(home.placed, texts)):
        if i not in home.left_out:
            by_file[name].append(text)
    for at, text in enumerate(controls):
        by_file[files[at % len(files)]].append(text)
    layout = {"IDENTITY.md": "I am Ada, a calm garden assistant.\n", "AGENTS.md": "- Review first.\n",
              "skills/ops/deploy/SKILL.md": "---\nname: deploy\ndescription: How to deploy.\n---\n# Deploy\n",
              "manifest.json": json.dumps(MANIFEST)}
    for name, entries in by_file.items():
        layout[name] = markdown(Path(name).stem, [t for t in entries if t in controls],
                                [t for t in entries if t not in controls])
    for relative, text in layout.items():
        (repo / relative).parent.mkdir(parents=True, exist_ok=True)
        (repo / relative).write_text(text, encoding="utf-8")
    report = import_soul(repo, hermes, origin="https://example.org/ada-soul.git",
                         commit="0123456789abcdef0123456789abcdef01234567")
    if report.status == "failed" or report.errors:
        raise SystemExit(f"import failed: {report.errors[:3]}")
    home.notes.append(f"import: {report.memories}")
    return home


def _service(soul_file: Path) -> MemoryService:
    service = MemoryService(SoulFile(soul_file), embed=False)
    service.stderr = io.StringIO()  # the refusals' log
    return service


def write_turns(folder: Path, texts: list[str], controls: tuple[str, ...] = CONTROLS) -> Home:
    """The memory service's sync_turn, each text as the user's message."""
    folder.mkdir(parents=True, exist_ok=True)
    home = Home("turn capture (sync_turn)", folder / "soul.json", texts, controls)
    service = _service(home.soul_file)
    for at, text in enumerate([*controls, *texts]):
        answer = service.handle({"id": at, "op": "sync_turn", "args": {
            "user": text, "assistant": "Noted.", "session_id": f"s{at // TURNS_PER_SESSION}",
            "turn_id": f"t{at}", "platform": "cli"}})
        if not answer["ok"]:
            home.notes.append(answer["error"][:120])
    home.sessions = sorted({f"s{at // TURNS_PER_SESSION}" for at in range(len(controls) + len(texts))})  # type: ignore[attr-defined]
    return home


def consolidate_turns(home: Home) -> Home:
    """The service's consolidation of every session `write_turns` stored (the same home)."""
    service = _service(home.soul_file)
    totals = {"added": 0, "flagged": 0, "refused": 0}
    for session in home.sessions:  # type: ignore[attr-defined]
        answer = service.handle({"id": 1, "op": "consolidate", "args": {"session_id": session}})
        assert answer["ok"], answer
        totals["added"] += len(answer["result"]["added"])
        totals["flagged"] += answer["result"]["flagged"]
        totals["refused"] += answer["result"]["refused"]
    done = Home("turn capture, then consolidation", home.soul_file, home.texts, home.controls)
    done.notes.append(f"consolidation: {totals['added']} typed memories added, {totals['flagged']} sentences "
                      f"left out as flagged, {totals['refused']} refused")
    return done


def write_compress(folder: Path, texts: list[str], controls: tuple[str, ...] = CONTROLS) -> Home:
    """The service's consolidation of the conversation Hermes is about to compress: each text a
    user message of it (not stored as a turn first)."""
    folder.mkdir(parents=True, exist_ok=True)
    home = Home("consolidation of a conversation being compressed", folder / "soul.json", texts, controls)
    service = _service(home.soul_file)
    every = [*controls, *texts]
    added = 0
    for start in range(0, len(every), TURNS_PER_SESSION):
        messages = [{"role": "user", "content": t} for t in every[start:start + TURNS_PER_SESSION]]
        answer = service.handle({"id": start, "op": "consolidate",
                                 "args": {"session_id": f"c{start}", "messages": messages}})
        assert answer["ok"], answer
        added += len(answer["result"]["added"])
    home.notes.append(f"consolidation: {added} typed memories added")
    return home


# ------------------------------------------------------------------ the prompts
@dataclass
class Prompts:
    """Everything of a home that goes into a prompt, as (where, text, ids shown) triples."""

    prime: list[tuple[str, set[str]]] = field(default_factory=list)
    snapshot: list[str] = field(default_factory=list)
    prefetch: list[tuple[str, set[str]]] = field(default_factory=list)


def context_of(text: str) -> str:
    return " ".join(text.split()[:CONTEXT_WORDS])[:400]


async def _prime(target: Any, contexts: list[str], timeout: float) -> tuple[list[tuple[str, set[str]]], list[str]]:
    primes, snapshots = [], []

    async def call(args: dict[str, Any]) -> dict[str, Any]:
        result = await client.call_tool("soul_prime", args)
        assert not result.is_error, result.content[0].text
        return result.structured_content

    async with Client(target, read_timeout_seconds=timeout) as client:
        first = await call({"context": contexts[0] if contexts else "", "limit": 20, "max_chars": 20_000})
        primes.append(("\n".join(strings(first)), shown_ids(first)))
        snapshots.append(first["snapshot"])
        snapshots.append((await client.read_resource("soul://snapshot")).contents[0].text)
        for context in contexts:
            answer = await call({"context": context, "limit": 10, "max_chars": 0})
            primes.append(("\n".join(strings(answer)), shown_ids(answer)))
    return primes, snapshots


def prompts(home: Home, queries: list[str], timeout: float = 60.0, target: Any = None) -> Prompts:
    """soul_prime (per query's first words), the snapshots, the service's recall per query.
    `target`: the MCP server to ask, as `mcp.Client` takes it (default: the server in-process;
    `StdioServerParameters` start `python -m soulgraph.mcp`); `timeout`: seconds per request,
    and ten times that for the whole conversation."""
    out = Prompts()
    target = target if target is not None else build_server(SoulFile(home.soul_file), embed=False)
    contexts = [context_of(q) for q in queries]
    out.prime, out.snapshot = asyncio.run(asyncio.wait_for(_prime(target, contexts, timeout), 10 * timeout))
    service = _service(home.soul_file)
    answer = service.handle({"id": 0, "op": "snapshot", "args": {}})
    assert answer["ok"], answer
    out.snapshot.append(answer["result"]["text"])
    for at, query in enumerate(queries):
        answer = service.handle({"id": at, "op": "recall", "args": {"query": query}})
        assert answer["ok"], answer
        out.prefetch.append((answer["result"]["text"], set(answer["result"]["ids"])))
    return out


# ------------------------------------------------------------------ measuring
@dataclass
class Measured:
    name: str
    written: int
    refused: set[int]  # not stored, and the scanner sees a secret in it: refused
    not_kept: set[int]  # not stored, no secret: the path keeps only pieces of it (consolidation's sentences)
    flagged: set[int]
    unflagged: set[int]
    pinned_unflagged: set[int]
    in_prime: set[int]
    in_snapshot: set[int]
    in_prefetch: set[int]
    flagged_shown: set[str]  # ids of flagged memories found in a prime or prefetch answer (must be none)
    controls_shown: dict[str, bool]
    short_pieces: list[str]  # unflagged memories shorter than STRETCH that are a piece of an injection
    short_pieces_shown: list[str]  # those of them found in a prompt
    notes: list[str]
    placed: list[str]
    # injection -> (id, first line) of each unflagged memory holding it
    unflagged_holders: dict[int, list[tuple[str, str]]] = field(default_factory=dict)


def measure(home: Home, prompts_of: Callable[[Home, list[str]], Prompts] = prompts,
            needles: list[str] | None = None) -> Measured:
    """Where `home`'s texts went; `needles[i]`: what to look for of text i (default: the text
    itself; the secrets run looks for the credential alone)."""
    texts = home.texts
    finder = Finder(needles or texts)
    graph = SoulFile(home.soul_file).graph() if home.soul_file.exists() else None
    nodes = [*graph.nodes.values(), *graph.branch.values()] if graph is not None else []
    holders: dict[int, list[Any]] = {}
    short_pieces = []
    flat_texts = finder.texts
    for node in nodes:
        held = finder.found(node.content)
        body = flat(node.content)
        if needles is None and not held and STRETCH > len(body) >= 8 and not record.flagged(node.metadata):
            if body not in CONTROLS and any(body in t for t in flat_texts):
                short_pieces.append(node)
        for i in held:
            holders.setdefault(i, []).append(node)
    missing = {i for i in range(len(texts)) if i not in holders}
    refused = {i for i in missing if i in home.left_out or scan(texts[i]).secrets}
    not_kept = missing - refused
    unflagged = {i for i, held in holders.items() if any(not record.flagged(n.metadata) for n in held)}
    flagged = set(holders) - unflagged
    pinned = {i for i in unflagged if any(n.pinned and not record.flagged(n.metadata) for n in holders[i])}

    result = prompts_of(home, [*texts, *home.controls])  # the controls' own queries: they must show
    prime_text = "\n".join(text for text, _ids in result.prime)
    snapshot_text = "\n".join(result.snapshot)
    prefetch_text = "\n".join(text for text, _ids in result.prefetch)
    ids = set().union(*(ids for _t, ids in result.prime), *(ids for _t, ids in result.prefetch))
    flagged_ids = {n.id for n in nodes if record.flagged(n.metadata)}
    in_prime, in_snapshot, in_prefetch = finder.found(prime_text), finder.found(snapshot_text), finder.found(prefetch_text)
    controls_shown = {"prime": any(c in prime_text for c in home.controls),
                      "snapshot": any(c in snapshot_text for c in home.controls),
                      "prefetch": any(c in prefetch_text for c in home.controls)}
    every = prime_text + snapshot_text + prefetch_text
    return Measured(home.name, len(texts), refused, not_kept, flagged, unflagged, pinned, in_prime, in_snapshot, in_prefetch,
                    ids & flagged_ids, controls_shown, [flat(n.content) for n in short_pieces],
                    [flat(n.content) for n in short_pieces if flat(n.content) in flat(every)], home.notes, home.placed,
                    {i: [(n.id, flat(n.content)[:90]) for n in held if not record.flagged(n.metadata)]
                     for i, held in holders.items() if i in unflagged})


# ------------------------------------------------------------------ printing
def share(part: int, whole: int) -> str:
    return f"{part} ({part / max(whole, 1):.1%})"


def table(rows: list[Measured]) -> None:
    print("| path | written | refused (secret) | not kept whole | flagged | stored unflagged | in prime | in snapshot |"
          " in prefetch | control shown (prime/snapshot/prefetch) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for m in rows:
        shown = "/".join("yes" if m.controls_shown[k] else "no" for k in ("prime", "snapshot", "prefetch"))
        print(f"| {m.name} | {m.written} | {share(len(m.refused), m.written)} | {share(len(m.not_kept), m.written)} | "
              f"{share(len(m.flagged), m.written)} | "
              f"{share(len(m.unflagged), m.written)} | {share(len(m.in_prime), m.written)} | "
              f"{share(len(m.in_snapshot), m.written)} | {share(len(m.in_prefetch), m.written)} | {shown} |")


def secrets_table(rows: list[Measured]) -> None:
    print("| path | written | secret kept nowhere (refused, or cut out of a turn) | secret stored | in prime |"
          " in snapshot | in prefetch | control shown (prime/snapshot/prefetch) |")
    print("|---|---|---|---|---|---|---|---|")
    for m in rows:
        shown = "/".join("yes" if m.controls_shown[k] else "no" for k in ("prime", "snapshot", "prefetch"))
        stored = m.flagged | m.unflagged
        print(f"| {m.name} | {m.written} | {share(len(m.refused | m.not_kept), m.written)} | "
              f"{share(len(stored), m.written)} | {share(len(m.in_prime), m.written)} | "
              f"{share(len(m.in_snapshot), m.written)} | {share(len(m.in_prefetch), m.written)} | {shown} |")


def by_file(m: Measured) -> list[Measured]:
    """`m` split by the file each text went into."""
    out = []
    for name in dict.fromkeys(m.placed):
        keep = {i for i, p in enumerate(m.placed) if p == name}
        out.append(Measured(f"{m.name}: {name}", len(keep), m.refused & keep, m.not_kept & keep, m.flagged & keep, m.unflagged & keep,
                            m.pinned_unflagged & keep, m.in_prime & keep, m.in_snapshot & keep,
                            m.in_prefetch & keep, set(), m.controls_shown, [], [], [], []))
    return out


def sample(label: str, indices: Iterable[int], records: list[dict], count: int = 5) -> None:
    indices = sorted(indices)
    if not indices:
        return
    print(f"\n{label} ({len(indices)}; the first {min(count, len(indices))}):\n")
    print("| # | length | lang or kind | source | begins |\n|---|---|---|---|---|")
    for i in indices[:count]:
        r = records[i]
        begins = flat(r["text"])[:70].replace("|", "\\|")
        print(f"| {i} | {len(r['text'])} | {r.get('lang') or r.get('kind', '')} | {r.get('source', '').split(':')[0]} "
              f"| {begins} |")


def show_leaks(rows: list[Measured], records: list[dict]) -> None:
    """Each injection that reaches a prompt, per path: its record (line number in the corpus,
    1-based), the file it was placed in, where it shows, and the unflagged memories holding it."""
    print("\nInjections that reach a prompt (--show-leaks):\n")
    print("| path | record (corpus line) | file | shown in | unflagged memories holding it |\n|---|---|---|---|---|")
    for m in rows:
        for i in sorted(m.in_prime | m.in_snapshot | m.in_prefetch):
            r = records[i]
            where = "/".join(k for k, got in (("prime", m.in_prime), ("snapshot", m.in_snapshot),
                                                ("prefetch", m.in_prefetch)) if i in got)
            held = "; ".join(f"{node_id}: {begins}" for node_id, begins in m.unflagged_holders.get(i, []))
            print(f"| {m.name} | {r.get('corpus_line', i + 1)} | {m.placed[i] if m.placed else ''} | {where} | "
                  f"{held.replace('|', chr(92) + '|')} |")


def credential(record: dict) -> str:
    """What of a secrets record to look for: the longest stretch the scanner finds in its text
    (the turn path cuts that out and keeps the rest; under 12 characters, with the 24 before
    it), else, when the scanner finds none, the record's `secret` (stored whole: a miss)."""
    found = scan(record["text"]).secrets
    if not found:
        return record["secret"]
    longest = max(found, key=lambda f: f.end - f.start)
    # A short one ("admin", "secret") is looked for with the words before it, or it would be
    # found in any text that uses the word.
    start = longest.start if longest.end - longest.start >= 12 else max(0, longest.start - 24)
    return record["text"][start:longest.end]


def every_path(root: Path, texts: list[str], needles: list[str] | None,
               timings: list[tuple[str, float]]) -> list[Measured]:
    """`texts` through each path, a fresh home each, measured (`needles`: as `measure` takes them)."""
    rows: list[Measured] = []

    def run(make: Callable[[], Home]) -> Home:
        t0 = time.perf_counter()
        home = make()
        rows.append(measure(home, needles=needles))
        timings.append((home.name, time.perf_counter() - t0))
        return home

    run(lambda: write_tools(root / "tools", texts))
    run(lambda: write_seed(root / "seed", texts))
    run(lambda: write_import(root / "import", texts))
    turns = run(lambda: write_turns(root / "turns", texts))
    run(lambda: consolidate_turns(turns))
    run(lambda: write_compress(root / "compress", texts))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--limit", type=int, default=0, help="a random sample of N injections (default: all)")
    parser.add_argument("--seed", type=int, default=1, help="the sample's random seed")
    parser.add_argument("--secrets", action="store_true",
                        help="also write poison/secrets-dev.jsonl through every path and look for the credentials")
    parser.add_argument("--show-leaks", action="store_true",
                        help="print each injection that reaches a prompt: its corpus line, path, file and memories")
    parser.add_argument("--keep", type=Path, help="write the homes here (kept) instead of a temporary folder")
    args = parser.parse_args(argv)
    path = args.data / "poison" / "injections-dev.jsonl"
    with path.open(encoding="utf-8") as handle:  # lines end at "\n" alone: a text may hold U+2028
        records = [{**json.loads(line), "corpus_line": number} for number, line in enumerate(handle, 1) if line.strip()]
    if args.limit and args.limit < len(records):
        records = random.Random(args.seed).sample(records, args.limit)
    texts = [r["text"] for r in records]
    started = time.perf_counter()
    print(f"{len(texts)} injections of {path.name}; one fresh soul home per path\n")
    timings: list[tuple[str, float]] = []
    with contextlib.ExitStack() as stack:
        root = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="poison-paths-")))
        rows = every_path(root / "injections", texts, None, timings)
        secret_rows: list[Measured] = []
        if args.secrets:
            path = args.data / "poison" / "secrets-dev.jsonl"
            with path.open(encoding="utf-8") as handle:
                secrets = [json.loads(line) for line in handle if line.strip()]
            if args.limit and args.limit < len(secrets):
                secrets = random.Random(args.seed).sample(secrets, args.limit)
            secret_rows = every_path(root / "secrets", [r["text"] for r in secrets], [credential(r) for r in secrets],
                                     timings)

    table(rows)
    print("\nBy file (the seeded home and the imported repository held the injections round robin):\n")
    table([part for m in rows if m.placed for part in by_file(m)])
    total_shown = set().union(*(m.in_prime | m.in_snapshot | m.in_prefetch for m in rows))
    print(f"\n**Injections in a prime, a snapshot or a prefetch, any path: {len(total_shown)} of {len(texts)}** (goal 0)")
    print(f"flagged memories named in a prime or prefetch answer: {sum(len(m.flagged_shown) for m in rows)} (must be 0); "
          f"unflagged pinned injections: {sum(len(m.pinned_unflagged) for m in rows)}")
    whole = rows[0].unflagged | rows[0].refused  # what the scanner misses in the text as a whole (soul_add)
    for m in rows:
        shown = m.in_prime | m.in_snapshot | m.in_prefetch
        print(f"- {m.name}: {'; '.join(m.notes) + '; ' if m.notes else ''}"
              f"in a prompt though soul_add's write of the whole text is flagged: {len(shown - whole)}; "
              f"unflagged pieces under {STRETCH} characters: {len(m.short_pieces)} (in a prompt: {len(m.short_pieces_shown)})")
    sample("The scanner's misses: stored unflagged through soul_add", rows[0].unflagged, records)
    for m in rows[1:]:
        sample(f"In a prompt though soul_add's write of the whole text is flagged, {m.name}",
               (m.in_prime | m.in_snapshot | m.in_prefetch) - whole, records)
    pieces = [(m.name, piece) for m in rows for piece in m.short_pieces_shown]
    if pieces:
        print(f"\nPieces under {STRETCH} characters of split or consolidated injections, unflagged, in a prompt "
              f"({len(pieces)}; the first 10):\n")
        print("| path | piece |\n|---|---|")
        for name, piece in pieces[:10]:
            print(f"| {name} | {piece.replace('|', chr(92) + '|')} |")
    if args.show_leaks:
        show_leaks(rows, records)
    refused = set().union(*(m.refused for m in rows))
    sample("Refused: the scanner saw a secret in the injection (any path)", refused, records)
    if secret_rows:
        print(f"\nSecrets: {secret_rows[0].written} texts of secrets-dev.jsonl, each holding a credential, through "
              "the same paths (looked for: what the scanner finds in the text, else the record's `secret`; the soul-repo import leaves out the texts the "
              "scanner refuses, since validation refuses a repository that holds any):\n")
        secrets_table(secret_rows)
        shown = set().union(*(m.in_prime | m.in_snapshot | m.in_prefetch for m in secret_rows))
        print(f"\n**Credentials in a prime, a snapshot or a prefetch, any path: {len(shown)} of "
              f"{secret_rows[0].written}**")
        sample("Credentials stored through soul_add (the scanner's misses, or a text it allows)",
               secret_rows[0].flagged | secret_rows[0].unflagged, secrets, count=10)
    print("\n" + " · ".join(f"{name}: {seconds:.0f} s" for name, seconds in timings)
          + f" · total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
