"""Seed a soul graph from a Hermes home: `python -m soulgraph.seed`.

Sources, in order (the first copy of an entry gives its node's place and line):

- `SOUL.md` at the home's root: the agent's persona. Its entries are pinned axioms, those
  the scanner passes: an entry that reads like prompt injection is stored flagged (private,
  not pinned, withheld from prompts) and listed in the report's `flagged`; one holding a
  secret is not seeded (a warning says which).
- `memories/MEMORY.md` (the agent's notes) and `memories/USER.md` (about the user).
- Any other `*.md` under `memories/`, and `MEMORY.md` / `USER.md` at the root (an older
  layout).
- Only when asked (`include_backups`, `--include-backups`): the backups Hermes keeps under
  `memories/`. hermes-agent 0.19 writes `MEMORY.md.bak.<unix time>` / `USER.md.bak.<unix
  time>` when it finds a memory file edited outside its memory tool. An entry found only
  there may be one the user removed on purpose, so by default backups are not read and the
  warnings name each one skipped.

One node per entry, one per section heading (the parent of the entries under it). The
same entry in several copies is one node whose metadata lists every copy. Files that
are missing, empty, binary or not UTF-8 give a warning, never an error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soulgraph.engine import record
from soulgraph.engine.graph import Clock, CycleError, SoulGraph
from soulgraph.hermes.home import HermesHomeError, read_text_leniently, resolve_home
from soulgraph.hermes.markdown_entries import normalise, parse_blocks, stretches
from soulgraph.memory import guard
from soulgraph.memory.guard import flagged_nodes
from soulgraph.memory.write import RefusedMemory, remember
from soulgraph.store import SoulFile, SoulFileError

AXIOM_TAG = "axiom"
SECTION_TAG = "section"


@dataclass(frozen=True)
class Source:
    relpath: str  # relative to the home, as recorded in node metadata
    tag: str  # "soul", "memory" or "user"
    pinned: bool  # SOUL.md entries are axioms


def _tag_for(name: str) -> str:
    return "user" if name.upper().startswith("USER") else "memory"


def is_backup(name: str) -> bool:
    """Hermes' backup of a memory file: `MEMORY.md.bak.<unix time>`, `USER.md.bak.<…>`."""
    return name.startswith(("MEMORY.md.", "USER.md.")) and ".bak" in name


def backups(home: Path) -> list[str]:
    memories = home / "memories"
    return sorted(f"memories/{p.name}" for p in memories.iterdir() if is_backup(p.name)) if memories.is_dir() else []


def find_sources(home: Path, include_backups: bool = False) -> list[Source]:
    sources = [
        Source("SOUL.md", "soul", True),
        Source("memories/MEMORY.md", "memory", False),
        Source("memories/USER.md", "user", False),
    ]
    memories = home / "memories"
    if memories.is_dir():
        copies = sorted(
            p.name for p in memories.iterdir()
            if not p.name.startswith(".") and p.name not in ("MEMORY.md", "USER.md")
            and not p.name.endswith((".lock", ".tmp"))
            and (p.name.startswith(("MEMORY.md", "USER.md")) or p.suffix == ".md")
            and (include_backups or not is_backup(p.name))
        )
        sources += [Source(f"memories/{name}", _tag_for(name), False) for name in copies]
    for name in ("MEMORY.md", "USER.md"):
        if (home / name).exists():
            sources.append(Source(name, _tag_for(name), False))
    return sources


def seed_graph(hermes_home: str | Path, clock: Clock = time.time, *,
               include_backups: bool = False) -> tuple[SoulGraph, list[str]]:
    """Build a soul graph from the Hermes home `hermes_home` (already resolved: no
    profile redirect here). Returns the graph and human-readable warnings (which name the
    backups left out, unless `include_backups`)."""
    home = Path(hermes_home)
    graph = SoulGraph(clock=clock)
    warnings: list[str] = [] if include_backups else [
        f"{name}: a backup Hermes keeps, not seeded (an entry only there may have been removed on purpose; "
        "--include-backups seeds backups too)" for name in backups(home)]
    by_key: dict[tuple[str, ...], str] = {}  # dedup key -> node id
    for source in find_sources(home, include_backups):
        read = read_text_leniently(home / source.relpath, source.relpath)
        if read.warning:
            warnings.append(read.warning)
        if read.text is None:
            continue
        _add_file(graph, by_key, source, read.text, warnings)
    return graph, warnings


def _add_file(graph: SoulGraph, by_key: dict[tuple[str, ...], str], source: Source,
              text: str, warnings: list[str]) -> None:
    blocks = parse_blocks(text)
    # A block written beside text that reads like injection (the same stretch, list or section,
    # or § entry of a memory file: markdown_entries.stretches) is flagged with it (memory/guard.py's
    # CONTEXT): a jailbreak split into paragraphs, or by headings and list items of its own.
    context = guard.context_of([b.content for b in blocks], stretches(blocks, writes=source.tag != "soul"))
    keys: list[tuple[str, ...]] = []
    ids: list[str | None] = []  # None: a block the scanner refused
    for at, block in enumerate(blocks):
        content = normalise(block.content) if block.kind == "section" else block.content.strip()
        parent_key = keys[block.parent] if block.parent is not None else ()
        # An entry is the same wherever it appears; a section is the same heading
        # under the same headings.
        if block.kind == "section":
            key = ("section", *parent_key[1:], content)
        else:
            key = ("entry", normalise(content))
        keys.append(key)
        where = {"file": source.relpath, "line": block.line}
        pin = source.pinned and block.kind == "entry"
        tags = [source.tag] + ([AXIOM_TAG] if pin else []) + ([SECTION_TAG] if block.kind == "section" else [])
        node_id = by_key.get(key)
        if node_id is None:
            try:  # the one way in: scanned (secrets refused, injection marked) and stamped
                written = remember(graph, content, tags, writer="seed", pinned=pin,
                                   source=f"seed:{source.relpath}:{block.line}", where=f"{source.relpath}:{block.line}",
                                   metadata={"kind": block.kind, "source": source.relpath, "line": block.line,
                                             "sources": [where], "seeded_from": "hermes",
                                             **({guard.CONTEXT: {"rules": context[at]}} if at in context else {})})
            except RefusedMemory as exc:
                warnings.append(f"{exc}; this entry was not seeded")
                ids.append(None)
                continue
            warnings.extend(written.warnings)
            node = written.node
            node_id = by_key[key] = node.id
        else:
            node = graph.get(node_id)
            metadata = dict(node.metadata)
            if where not in metadata["sources"]:  # through the guard: a file name is scanned too
                metadata["sources"] = [*metadata["sources"], where]
            held = metadata.get(guard.CONTEXT)
            had = held.get("rules", []) if isinstance(held, dict) else []
            if at in context and not set(context[at]) <= set(had):  # this copy sits beside injection: flagged
                metadata[guard.CONTEXT] = {"rules": sorted({*had, *context[at]})}
            if metadata != node.metadata:
                graph.update(node_id, metadata=metadata)
            graph.tag(node_id, *tags)
            if pin and not node.pinned:
                if record.flagged(node.metadata):
                    warnings.append(f"{source.relpath}:{block.line}: not pinned: this entry reads like prompt "
                                    f"injection ({', '.join(record.flagged(node.metadata))})")
                else:
                    graph.pin(node_id)
        ids.append(node_id)
        if block.parent is not None and ids[block.parent] is not None and ids[block.parent] != node_id:
            try:
                graph.link(ids[block.parent], node_id)
            except CycleError:
                warnings.append(
                    f"{source.relpath}:{block.line}: nesting here contradicts another copy "
                    "(it would close a cycle); this edge was left out"
                )


def summarize(graph: SoulGraph, warnings: list[str], home: Path) -> dict[str, Any]:
    by_file: dict[str, int] = {}
    for node in graph.nodes.values():
        for where in node.metadata.get("sources", []):
            by_file[where["file"]] = by_file.get(where["file"], 0) + 1
    return {
        "hermes_home": str(home),
        "nodes": len(graph),
        "sections": sum(1 for n in graph.nodes.values() if n.metadata.get("kind") == "section"),
        "edges": sum(1 for _ in graph.edges()),
        "pinned": len(graph.pinned),
        "by_tag": {tag: len(graph.tags.get(tag, ())) for tag in ("soul", "memory", "user", AXIOM_TAG, SECTION_TAG)},
        "entries_by_file": by_file,
        "flagged": flagged_report(graph),
        "warnings": warnings,
    }


def flagged_report(graph: SoulGraph) -> list[dict[str, Any]]:
    """The entries the scanner flagged as prompt injection: stored private, never pinned, withheld
    from prompts. `pin_dropped`: a SOUL.md entry that would have been a pinned axiom."""
    return [{"id": node.id, "sources": node.metadata.get("sources", []), "rules": list(record.flagged(node.metadata)),
             "pin_dropped": AXIOM_TAG in node.tags and not node.pinned} for node in flagged_nodes(graph)]


def _describe(graph: SoulGraph) -> list[dict[str, Any]]:
    return [
        {"id": n.id, "content": n.content, "tags": n.tags, "pinned": n.pinned,
         "parents": sorted(graph.parents[n.id]), "sources": n.metadata.get("sources", [])}
        for n in graph.nodes.values()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m soulgraph.seed",
                                     description="Build a soul graph from a Hermes home's SOUL.md and memories.")
    parser.add_argument("--hermes-home", help="the Hermes home (default: $HERMES_HOME, else ~/.hermes); "
                        "an active_profile file redirects to that profile")
    parser.add_argument("--out", type=Path, help="write the graph to this soul file (default: only report)")
    parser.add_argument("--include-backups", action="store_true",
                        help="also seed Hermes' backups of the memory files (memories/*.md.bak.*)")
    parser.add_argument("--force", action="store_true", help="replace --out when it already exists")
    parser.add_argument("--json", action="store_true", help="print a JSON report with every node")
    args = parser.parse_args(argv)
    try:
        home = resolve_home(args.hermes_home)
    except HermesHomeError as exc:
        print(f"soulgraph.seed: {exc}", file=sys.stderr)
        return 1
    if not home.path.is_dir():
        print(f"soulgraph.seed: no Hermes home at {home.path}", file=sys.stderr)
        return 1
    graph, warnings = seed_graph(home.path, include_backups=args.include_backups)
    report = summarize(graph, warnings, home.path)
    report["profile"] = home.profile
    report["out"] = str(args.out) if args.out else None
    if args.out:
        if args.out.exists() and not args.force:
            print(f"soulgraph.seed: {args.out} already exists; not replaced (use --force)", file=sys.stderr)
            return 1
        try:
            SoulFile(args.out).save(graph)
        except (SoulFileError, OSError) as exc:
            print(f"soulgraph.seed: cannot write {args.out}: {exc}", file=sys.stderr)
            return 1
    if args.json:
        report["graph"] = _describe(graph)
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    print(f"Hermes home: {home.path}" + (f" (profile {home.profile})" if home.profile else ""))
    print(f"{report['nodes']} nodes ({report['sections']} sections), {report['edges']} edges, {report['pinned']} pinned")
    for relpath, count in report["entries_by_file"].items():
        print(f"  {relpath}: {count}")
    if report["flagged"]:
        print(f"{len(report['flagged'])} flagged as prompt injection (stored private, not pinned, withheld from prompts):")
        for item in report["flagged"]:
            places = ", ".join(f"{s['file']}:{s['line']}" for s in item["sources"])
            print(f"  {item['id']} ({places}): {', '.join(item['rules'])}")
    for warning in warnings:
        print(f"warning: {warning}")
    if args.out:
        print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
