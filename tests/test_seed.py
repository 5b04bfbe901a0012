"""Seeding a soul graph from a Hermes home: entries, sections, pins, sources, copies."""

from __future__ import annotations

import json

import pytest

from tests.seed_fixtures import write_home
from soulgraph.hermes import seed as seed_module
from soulgraph.hermes.markdown_entries import parse_blocks
from soulgraph.hermes.seed import seed_graph
from soulgraph.store import SoulFile

NOW = 1_750_000_000.0


def clock():
    return NOW


def by_content(graph, text):
    found = [n for n in graph.nodes.values() if n.content == text]
    assert len(found) == 1, f"{text!r}: {len(found)} nodes"
    return found[0]


def parent_contents(graph, node):
    return sorted(graph.nodes[p].content for p in graph.parents[node.id])


@pytest.fixture
def home(tmp_path):
    return write_home(tmp_path / "home")


@pytest.fixture
def seeded(home):
    return seed_graph(home, clock=clock, include_backups=True)


# --------------------------------------------------------------------- the parser
def test_parser_sections_bullets_paragraphs_and_separators():
    text = "# A\n\npara one\nstill one\n\n## B\n- x\n  - y\n- z\n§\nfree entry\n§\n# C\n```\n# not a heading\n```\n"
    blocks = parse_blocks(text)
    shown = [(b.kind, b.content, b.line, blocks[b.parent].content if b.parent is not None else None) for b in blocks]
    assert shown == [
        ("section", "A", 1, None),
        ("entry", "para one\nstill one", 3, "A"),
        ("section", "B", 6, "A"),
        ("entry", "x", 7, "B"),
        ("entry", "y", 8, "x"),
        ("entry", "z", 9, "B"),
        ("entry", "free entry", 11, None),  # `§` ends the sections around it
        ("section", "C", 13, None),
        ("entry", "```\n# not a heading\n```", 14, "C"),
    ]


# --------------------------------------------------------------------- the graph
def test_one_node_per_entry_and_section(seeded):
    graph, warnings = seeded
    assert warnings == []
    contents = sorted(n.content for n in graph.nodes.values())
    assert contents == sorted([
        # SOUL.md: 3 sections, 6 entries
        "Identity", "Values", "Style",
        "You are Hermes, a careful assistant for the platform team.\nYou answer in plain words.",
        "Never run destructive commands without asking first.",
        "Prefer small, reversible changes.",
        "Take a backup before editing any config file.",
        'Say "I don\'t know" when you don\'t.',
        "Short answers; code over prose.",
        # MEMORY.md: 2 plain entries, one section with 2 bullets
        "Project atlas deploys with `make ship` from the main branch.",
        "The staging host stg-01 fills its disk every two weeks;\nclean /var/log/atlas first.",
        "Tooling", "atlas uses pnpm, not npm", "run tests with pnpm test --run",
        # USER.md
        "User is Dana, SRE lead; prefers terse answers.",
        "Dana works in UTC+1 and starts at 08:00.",
        # only in the drift snapshot
        "Grafana lives at grafana.internal:3000 (an entry the live file lost).",
    ])


def test_sections_are_parents_of_their_entries(seeded):
    graph, _ = seeded
    assert parent_contents(graph, by_content(graph, "Values")) == ["Identity"]
    assert parent_contents(graph, by_content(graph, "Style")) == ["Identity"]
    assert parent_contents(graph, by_content(graph, "Prefer small, reversible changes.")) == ["Values"]
    # a nested bullet is built on the bullet above it
    assert parent_contents(graph, by_content(graph, "Take a backup before editing any config file.")) == [
        "Prefer small, reversible changes."]
    assert parent_contents(graph, by_content(graph, "atlas uses pnpm, not npm")) == ["Tooling"]
    assert parent_contents(graph, by_content(graph, "Dana works in UTC+1 and starts at 08:00.")) == []
    assert set(graph.parents[by_content(graph, "Identity").id]) == set()


def test_soul_entries_are_pinned_axioms_and_sections_are_not(seeded):
    graph, _ = seeded
    pinned = sorted(graph.nodes[i].content for i in graph.pinned)
    assert len(pinned) == 6
    assert all("soul" in graph.nodes[i].tags and "axiom" in graph.nodes[i].tags for i in graph.pinned)
    values = by_content(graph, "Values")
    assert not values.pinned and values.tags == ["soul", "section"]
    # pins lead hot(): the agent's persona comes first at session start
    assert {n.id for n in graph.hot(6)} == graph.pinned


def test_every_node_knows_its_source_file_and_line(seeded):
    graph, _ = seeded
    node = by_content(graph, "Take a backup before editing any config file.")
    assert node.metadata["source"] == "SOUL.md" and node.metadata["line"] == 10
    assert node.metadata["kind"] == "entry"
    user = by_content(graph, "Dana works in UTC+1 and starts at 08:00.")
    assert (user.metadata["source"], user.metadata["line"], user.tags) == ("memories/USER.md", 3, ["user"])
    bullet = by_content(graph, "run tests with pnpm test --run")
    assert (bullet.metadata["source"], bullet.metadata["line"], bullet.tags) == ("memories/MEMORY.md", 8, ["memory"])


def test_the_same_entry_in_several_copies_is_one_node_with_every_source(seeded):
    graph, _ = seeded
    staging = by_content(graph, "The staging host stg-01 fills its disk every two weeks;\nclean /var/log/atlas first.")
    assert staging.metadata["sources"] == [
        {"file": "memories/MEMORY.md", "line": 3},
        {"file": "memories/MEMORY.md.bak.1714000000", "line": 3},
    ]
    lost = by_content(graph, "Grafana lives at grafana.internal:3000 (an entry the live file lost).")
    assert lost.metadata["sources"] == [{"file": "memories/MEMORY.md.bak.1714000000", "line": 6}]
    assert lost.tags == ["memory"]
    # lock and temp files are not copies
    files = {s["file"] for n in graph.nodes.values() for s in n.metadata["sources"]}
    assert files == {"SOUL.md", "memories/MEMORY.md", "memories/USER.md", "memories/MEMORY.md.bak.1714000000"}


def test_backups_are_seeded_only_when_asked_and_named_when_not(home):
    """An entry only in Hermes' backup may be one the user removed on purpose (issue 13)."""
    graph, warnings = seed_graph(home, clock=clock)
    lost = "Grafana lives at grafana.internal:3000 (an entry the live file lost)."
    assert lost not in {n.content for n in graph.nodes.values()}
    staging = by_content(graph, "The staging host stg-01 fills its disk every two weeks;\nclean /var/log/atlas first.")
    assert staging.metadata["sources"] == [{"file": "memories/MEMORY.md", "line": 3}]
    assert warnings == ["memories/MEMORY.md.bak.1714000000: a backup Hermes keeps, not seeded (an entry only there "
                        "may have been removed on purpose; --include-backups seeds backups too)"]
    assert lost in {n.content for n in seed_graph(home, clock=clock, include_backups=True)[0].nodes.values()}


def test_user_copies_are_tagged_user(home):
    (home / "memories" / "USER.md.bak.1714000001").write_text("Dana's manager is Eli.")
    graph, _ = seed_graph(home, clock=clock, include_backups=True)
    assert by_content(graph, "Dana's manager is Eli.").tags == ["user"]


def test_an_entry_in_soul_and_memory_is_pinned_and_has_both_tags(home):
    (home / "memories" / "USER.md").write_text("Prefer small, reversible changes.\n§\nOther.")
    graph, _ = seed_graph(home, clock=clock)
    node = by_content(graph, "Prefer small, reversible changes.")
    assert node.pinned and node.tags == ["soul", "axiom", "user"]
    assert [s["file"] for s in node.metadata["sources"]] == ["SOUL.md", "memories/USER.md"]


# --------------------------------------------------------------------- awkward files
def test_missing_files_warn(tmp_path):
    graph, warnings = seed_graph(tmp_path, clock=clock)
    assert len(graph) == 0
    assert warnings == [
        "SOUL.md: not found, nothing seeded from it",
        "memories/MEMORY.md: not found, nothing seeded from it",
        "memories/USER.md: not found, nothing seeded from it",
    ]


def test_empty_binary_latin1_bom_and_directory_files_never_crash(home):
    memories = home / "memories"
    (memories / "USER.md").write_text("  \n\n")
    (memories / "MEMORY.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (memories / "MEMORY.md.bak.1714000000").write_bytes("Caf\u00e9 au lait at 10.\n§\nna\u00efve".encode("latin-1"))
    (home / "SOUL.md").write_bytes(b"\xef\xbb\xbf# Identity\n\nPlain persona.\n")
    (memories / "notes.md").mkdir()
    graph, warnings = seed_graph(home, clock=clock, include_backups=True)
    assert sorted(n.content for n in graph.nodes.values()) == ["Café au lait at 10.", "Identity", "Plain persona.", "naïve"]
    assert by_content(graph, "Plain persona.").pinned  # the BOM did not hide the heading
    assert warnings == [
        "memories/MEMORY.md: looks binary (NUL bytes), skipped",
        "memories/USER.md: empty, nothing seeded from it",
        "memories/MEMORY.md.bak.1714000000: not valid UTF-8 (byte 3); read as Latin-1, check its accents",
        "memories/notes.md: is a directory, skipped",
    ]


def test_unreadable_file_warns(home):
    path = home / "memories" / "USER.md"
    path.chmod(0)
    try:
        try:
            path.read_bytes()
            pytest.skip("running as root: permissions do not stop reads")
        except PermissionError:
            pass
        _, warnings = seed_graph(home, clock=clock)
        assert "memories/USER.md: cannot be read (Permission denied), skipped" in warnings
    finally:
        path.chmod(0o600)


# --------------------------------------------------------------------- the command
def test_seed_command_writes_a_soul_file_and_reports(home, tmp_path, capsys):
    out = tmp_path / "soul.json"
    assert seed_module.main(["--hermes-home", str(home), "--out", str(out), "--json", "--include-backups"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["nodes"] == 17 and report["pinned"] == 6 and report["sections"] == 4
    assert report["entries_by_file"]["memories/MEMORY.md.bak.1714000000"] == 3
    assert len(SoulFile(out).graph()) == 17
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    # never replaces a soul file unless told to
    before = out.read_bytes()
    assert seed_module.main(["--hermes-home", str(home), "--out", str(out)]) == 1
    assert "already exists" in capsys.readouterr().err
    assert out.read_bytes() == before


def test_seed_command_follows_active_profile(home, tmp_path, capsys):
    root = tmp_path / "root"
    (root / "profiles").mkdir(parents=True)
    home.rename(root / "profiles" / "work")
    (root / "active_profile").write_text("work\n")
    assert seed_module.main(["--hermes-home", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"Hermes home: {root / 'profiles' / 'work'} (profile work)" in out
    assert "16 nodes (4 sections)" in out  # the backup-only entry is not seeded
