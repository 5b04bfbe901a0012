"""`soulrepo import DIR --hermes-home H`: seed 003's install steps 2–6 on a Hermes home made by
Hermes itself, from real git repositories; the real Hermes CLI lists the imported skill."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess

import pytest

from soulgraph.soulrepo.__main__ import main
from soulgraph.soulrepo.importer import STATE_FILE, import_soul
from soulgraph.store import SoulFile
from tests import hermes_client

MANIFEST = {
    "schema": "clawdie.layered-soul.v1", "agent_id": "ada", "display_name": "Ada", "owner": "operator-controlled",
    "updated_at": "2026-11-01T00:00:00Z",
    "core_files": {"soul": "SOUL.md", "user": "USER.md", "identity": "IDENTITY.md", "harness_rules": "AGENTS.md"},
    "layered_imports": {"skills": ["skills/**/*.md"], "memory": ["memories/curated/**/*.md"]},
    "privacy": {"raw_sessions": "archive-only", "secrets": "excluded", "operator_review_required": True},
}
FILES = {
    "SOUL.md": "# Ada\n\n- Calm, precise and kind.\n- Answers in the language she is asked in.\n",
    "USER.md": "# User\n\n- The operator prefers short answers.\n- The operator works from Berlin.\n",
    "IDENTITY.md": "I am Ada, the agent of the soulfleet lab.\n",
    "AGENTS.md": "- Never push to main without review.\n",
    "skills/ops/fleet-deploy/SKILL.md": ("---\nname: fleet-deploy\ndescription: How this fleet is deployed, step by "
                                        "step.\n---\n# Fleet deploy\n\nRun fleet-update with --check first.\n"),
    "skills/ops/fleet-deploy/checklist.md": "- inventory reviewed\n",
    "memories/curated/ops.md": ("# Ops\n\n- The staging database is db-7 in the Frankfurt region.\n"
                                "- Deploys happen on Tuesdays after the standup.\n"
                                "- The on-call rota lives in the ops wiki.\n"),
}
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@localhost", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@localhost", "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}, timeout=60).stdout.strip()


def commit(repo, files: dict[str, str | None], message="soul") -> str:
    for relative, text in files.items():
        path = repo / relative
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def make_repo(path, files=FILES, manifest=MANIFEST):
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    return commit(path, {**files, "manifest.json": json.dumps(manifest, indent=2) + "\n"})


def home_files(home) -> dict[str, str]:
    """Every file in the home and its SHA-256: what "nothing changed" is checked against."""
    return {str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(home.rglob("*")) if p.is_file()}


def imported_nodes(home):
    graph = SoulFile(home / "soul.json").graph()
    return {n.content: n for n in graph.nodes.values() if "import" in n.metadata}


@pytest.fixture
def installed_home(hermes_home):
    """A Hermes home with the soul graph installed (soul.json seeded), as the fleet leaves it."""
    from soulgraph.hermes.install import install

    assert install(hermes_home)["status"] == "changed"
    (hermes_home / "sessions" / "session_1.json").write_text('{"messages": []}')
    return hermes_home


def test_first_import_materializes_identity_skills_and_memories_with_provenance(installed_home, tmp_path, hermes_exe):
    home, repo = installed_home, tmp_path / "soul"
    sha = make_repo(repo)
    sessions_before = {k: v for k, v in home_files(home).items() if k.startswith("sessions/")}

    report = import_soul(repo, home)

    assert report.status == "changed", report.errors
    assert report.commit == sha and report.origin == str(repo)
    # Hermes' own default SOUL.md carries no user intent: replaced (no backup needed).
    assert report.identity == {"SOUL.md": "replaced Hermes' default", "memories/USER.md": "created",
                               "IDENTITY.md": "created"}
    assert (home / "SOUL.md").read_text() == FILES["SOUL.md"]
    assert (home / "memories/USER.md").read_text() == \
        "The operator prefers short answers.\n§\nThe operator works from Berlin."
    assert (home / "IDENTITY.md").read_text() == FILES["IDENTITY.md"]
    # The reviewed skill, whole, where Hermes looks; and Hermes itself lists it.
    assert report.skills == {"skills/ops/fleet-deploy": "installed"}
    assert (home / "skills/ops/fleet-deploy/checklist.md").read_text() == "- inventory reviewed\n"
    listed = hermes_client.skills_list(home)
    row = next((s for s in listed.skills if s.name == "fleet-deploy"), None)
    assert row is not None and row.category == "ops", listed.output
    # Memories: core identity pinned as axioms, the rest as memories, each with its provenance.
    nodes = imported_nodes(home)
    assert len(nodes) == 8
    soul = nodes["Calm, precise and kind."]
    assert soul.pinned and soul.kind == "axiom" and "soul-import" in soul.tags
    assert soul.source == f"import:{repo}@{sha}:SOUL.md"
    assert soul.metadata["import"] == {"origin": str(repo), "path": "SOUL.md", "entry": 1, "commit": sha}
    assert nodes["I am Ada, the agent of the soulfleet lab."].pinned
    ops = nodes["Deploys happen on Tuesdays after the standup."]
    assert not ops.pinned and ops.source == f"import:{repo}@{sha}:memories/curated/ops.md" and "memory" in ops.tags
    assert not nodes["The operator works from Berlin."].pinned
    # The axiom seeded from Hermes' default persona went with the file it came from.
    graph = SoulFile(home / "soul.json").graph()
    default = [n for n in graph.nodes.values() if n.source.startswith("seed:SOUL.md")]
    assert default and all(n.status == "archived" and not n.pinned for n in default)
    # Sessions are archive only: untouched.
    assert {k: v for k, v in home_files(home).items() if k.startswith("sessions/")} == sessions_before
    assert json.loads((home / STATE_FILE).read_text())["commit"] == sha


def test_a_second_import_of_the_same_commit_changes_nothing(installed_home, tmp_path, capsys):
    home, repo = installed_home, tmp_path / "soul"
    make_repo(repo)
    assert import_soul(repo, home).status == "changed"
    before = home_files(home)

    assert main(["import", str(repo), "--hermes-home", str(home)]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["status"] == "unchanged" and answer["changes"] == []
    assert answer["memories"]["unchanged"] == 8 and answer["memories"]["added"] == 0
    assert home_files(home) == before  # not a byte: soul.json, its journal, the state file


def test_a_new_commit_supersedes_what_changed_and_archives_what_went(installed_home, tmp_path):
    home, repo = installed_home, tmp_path / "soul"
    first = make_repo(repo)
    import_soul(repo, home)
    old = imported_nodes(home)
    second = commit(repo, {"memories/curated/ops.md": (
        "# Ops\n\n- The staging database is db-9 in the Frankfurt region.\n"  # changed
        "- Deploys happen on Tuesdays after the standup.\n"  # the same
        "- Backups are restored once a month as a drill.\n")})  # new; the on-call line went

    report = import_soul(repo, home)

    assert report.status == "changed" and report.commit == second
    assert report.memories | {} == {"added": 1, "unchanged": 6, "already_known": 0, "superseded": 1, "archived": 1,
                                    "refused": 0, "flagged": 0}
    graph = SoulFile(home / "soul.json").graph()
    was = graph.get(old["The staging database is db-7 in the Frankfurt region."].id)
    now = graph.get(was.superseded_by)
    assert was.status == "superseded" and now.content == "The staging database is db-9 in the Frankfurt region."
    assert now.source == f"import:{repo}@{second}:memories/curated/ops.md"
    assert graph.get(old["The on-call rota lives in the ops wiki."].id).status == "archived"
    kept = graph.get(old["Deploys happen on Tuesdays after the standup."].id)
    assert kept.status == "active" and kept.metadata["import"]["commit"] == first  # where it first came from
    # A changed axiom: the old one is no longer pinned.
    commit(repo, {"SOUL.md": "# Ada\n\n- Calm, precise and warm.\n- Answers in the language she is asked in.\n"})
    import_soul(repo, home)
    graph = SoulFile(home / "soul.json").graph()
    calm = graph.get(old["Calm, precise and kind."].id)
    assert calm.status == "superseded" and not calm.pinned and graph.get(calm.superseded_by).pinned


def test_the_users_own_identity_stays_unless_overwrite_with_a_backup(installed_home, tmp_path):
    home, repo = installed_home, tmp_path / "soul"
    make_repo(repo)
    (home / "SOUL.md").write_text("I am Bob, and I wrote this myself.\n")

    report = import_soul(repo, home)
    assert report.identity["SOUL.md"].startswith("kept: the home's own differs")
    assert (home / "SOUL.md").read_text() == "I am Bob, and I wrote this myself.\n"

    assert main(["import", str(repo), "--hermes-home", str(home), "--overwrite-identity"]) == 0
    assert (home / "SOUL.md").read_text() == FILES["SOUL.md"]
    backups = list((home / ".soulgraph/backups").iterdir())
    assert [b.read_text() for b in backups] == ["I am Bob, and I wrote this myself.\n"]


def test_skills_written_by_hand_are_never_replaced(installed_home, tmp_path):
    home, repo = installed_home, tmp_path / "soul"
    make_repo(repo, {**FILES, "skills/notes/SKILL.md": "---\nname: notes\ndescription: Notes.\n---\nv1\n"})
    mine = home / "skills/ops/fleet-deploy/SKILL.md"
    mine.parent.mkdir(parents=True)
    mine.write_text("---\nname: fleet-deploy\ndescription: my own\n---\nmine\n")

    report = import_soul(repo, home)
    assert report.skills == {"skills/ops/fleet-deploy": "hand-written, left alone", "skills/notes": "installed"}
    assert mine.read_text().endswith("mine\n")
    # One we installed and someone edited since: left alone at the next commit too.
    (home / "skills/notes/SKILL.md").write_text("---\nname: notes\ndescription: Notes.\n---\nedited here\n")
    commit(repo, {"skills/notes/SKILL.md": "---\nname: notes\ndescription: Notes.\n---\nv2\n"})
    assert import_soul(repo, home).skills["skills/notes"] == "edited here since imported, left alone"
    assert (home / "skills/notes/SKILL.md").read_text().endswith("edited here\n")
    # Put back as imported, it follows the repository again: updated, then removed when the
    # repository drops it.
    (home / "skills/notes/SKILL.md").write_text("---\nname: notes\ndescription: Notes.\n---\nv1\n")
    commit(repo, {"skills/notes/SKILL.md": "---\nname: notes\ndescription: Notes.\n---\nv3\n"})
    assert import_soul(repo, home).skills["skills/notes"] == "updated"
    commit(repo, {"skills/notes/SKILL.md": None})
    assert import_soul(repo, home).skills["skills/notes"] == "removed (gone from the soul repo)"
    assert not (home / "skills/notes").exists()


def test_check_shows_the_diff_and_changes_nothing(installed_home, tmp_path, capsys):
    home, repo = installed_home, tmp_path / "soul"
    make_repo(repo)
    before = home_files(home)

    assert main(["import", str(repo), "--hermes-home", str(home), "--check"]) == 0
    captured = capsys.readouterr()
    answer = json.loads(captured.out)
    assert answer["check"] and answer["status"] == "changed"
    assert "+- Calm, precise and kind." in answer["diff"] and "+++ b/skills/ops/fleet-deploy/SKILL.md" in captured.err
    assert "memory add: memories/curated/ops.md #2: Deploys happen on Tuesdays after the standup." in answer["changes"]
    assert home_files(home) == before


def test_a_tree_that_is_not_a_clean_checkout_is_named_by_its_content(installed_home, tmp_path):
    home, repo = installed_home, tmp_path / "soul"
    make_repo(repo)
    (repo / "IDENTITY.md").write_text("I am Ada, edited but not committed.\n")
    report = import_soul(repo, home, check=True)
    assert report.commit.startswith("tree-") and "not a clean git checkout" in report.warnings[0]
    assert import_soul(repo, home, check=True, commit="abc123", origin="https://u:secret@example.org/soul.git") \
        .origin == "https://example.org/soul.git"
    # A plain tree inside someone else's checkout (dotfiles in git) is not that checkout.
    outer = tmp_path / "dotfiles"
    outer.mkdir()
    git(outer, "init", "-q")
    shutil.copytree(repo, outer / "soul", ignore=shutil.ignore_patterns(".git"))
    inner = import_soul(outer / "soul", home, check=True)
    assert inner.origin == str(outer / "soul") and inner.commit.startswith("tree-")


BAD_INPUT = {
    "no manifest": (lambda repo: (repo / "manifest.json").unlink(), "manifest.json: missing"),
    "another schema": (lambda repo: (repo / "manifest.json").write_text(json.dumps({**MANIFEST, "schema": "x.v9"})),
                       "schema is 'x.v9'"),
    "a glob escaping the repo": (lambda repo: (repo / "manifest.json").write_text(json.dumps(
        {**MANIFEST, "layered_imports": {"memory": ["../elsewhere/*.md"]}})), "must be a relative path inside"),
    "a symlink pointing outside": (lambda repo: (repo / "memories/curated/passwd.md").symlink_to("/etc/passwd"),
                                   "leads outside the repository"),
    "a secret in a curated memory": (lambda repo: (repo / "memories/curated/ops.md").write_text(
        "- The deploy key is AKIAZ3QXJ5LRTNOPQR7S.\n"), "holds a secret"),
    "a 50 MB session file": (lambda repo: _big(repo / "sessions/2026-11-01.json"), "larger than 2 MiB"),
}


def _big(path):
    path.parent.mkdir(parents=True)
    with path.open("wb") as out:
        out.truncate(50 << 20)


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_is_refused_with_its_reason_and_nothing_changes(installed_home, tmp_path, case, capsys):
    home, repo = installed_home, tmp_path / "soul"
    make_repo(repo)
    spoil, reason = BAD_INPUT[case]
    spoil(repo)
    before = home_files(home)

    assert main(["import", str(repo), "--hermes-home", str(home)]) == 1
    answer = json.loads(capsys.readouterr().out)
    assert answer["status"] == "error" and "nothing was imported" in answer["errors"][0]
    assert any(reason in line for line in answer["errors"]), answer["errors"]
    assert home_files(home) == before
