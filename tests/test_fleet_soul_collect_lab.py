"""`fleet soul collect --into REPO` against the real SSH lab (a real sshd per host), then
`fleet-update --soul REPO` spreading what was merged: three hosts each learn something (through
the memory service and the tools' write path, into the soul file the deploy seeded), their exports
come back on one branch per host, the operator merges them, and every host gets the others'
memories while its own change nothing on it.

The lab tests build on each other, in order, like test_fleet_lab.py; the first tests need no lab.
"""

from __future__ import annotations

import json
import os
import pwd
import socket
import io
import subprocess
import tarfile

import pytest
from click.testing import CliRunner

from fleet.build import resolve_sha
from fleet.cli import soul
from fleet.soul_collect import CollectError, commit_export, prepare_repo
from soulgraph.hermes.memory_service import MemoryService
from soulgraph.soulrepo import learned
from soulgraph.soulrepo.export import export
from soulgraph.memory.write import remember
from soulgraph.store import SoulFile
from tests.fleet_helpers import clone_repo, git, reset_to_bare_hermes, run_update, snapshot
from tests.test_soulrepo_export_learned import EVIL, make_home

RESTART = 'echo restart >> "$HOME/gateway-restarts"'
SHARED_TEXT = "The team standup is at 09:30 in the east room."


def run_collect(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(soul, ["collect", *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def archive_of(folder) -> bytes:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        tar.add(folder, arcname=".")
    return data.getvalue()


def show(repo, ref, path) -> str:
    return git(repo, "show", f"{ref}:{path}")


def learned_text(repo, ref, host) -> str:
    """Every learned file of hosts/<host>/ at `ref`, one after the other."""
    names = git(repo, "ls-tree", "-r", "--name-only", ref, "--", f"hosts/{host}/memories/learned/").split()
    assert names, f"no learned files for {host} at {ref}"
    return "".join(show(repo, ref, name) + "\n" for name in sorted(names))


# ---------------------------------------------------------------------- the operator's side, no lab
def test_the_commit_goes_on_the_hosts_branch_and_a_rejected_line_stays_rejected(tmp_path):
    home = make_home(tmp_path / "home")
    service = MemoryService(SoulFile(home / "soul.json"), embed=False)
    for text in ("The build server is ci-3.", "Backups run at 02:00 UTC."):
        service.memory_write("add", "memory", text)
    first = export(home, tmp_path / "e1", commit=False)
    assert first.learned["exported"] == 2
    repo, made = prepare_repo(tmp_path / "soul")
    assert made
    (repo / "README.md").write_text("the fleet's soul\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "start")
    head = git(repo, "rev-parse", "HEAD")
    sha = commit_export(repo, "h1", archive_of(tmp_path / "e1"), "soul collect: h1 at now")
    assert git(repo, "rev-parse", "soul/h1") == sha and git(repo, "rev-parse", "HEAD") == head
    assert git(repo, "rev-parse", "soul/h1^") == head  # made on HEAD: a merge needs no unrelated histories
    assert git(repo, "status", "--porcelain") == ""  # the operator's tree and index untouched
    assert "ci-3" in learned_text(repo, "soul/h1", "h1")
    # The same export again (another date in its manifest): no commit.
    export(home, tmp_path / "e2", commit=False)
    assert commit_export(repo, "h1", archive_of(tmp_path / "e2"), "again") is None
    # The operator merges, rejecting one memory (its line deleted on main).
    git(repo, "merge", "-q", "soul/h1")
    [path] = (repo / "hosts/h1/memories/learned").glob("*.jsonl")
    path.write_text("".join(line for line in path.read_text().splitlines(True) if "ci-3" not in line))
    git(repo, "commit", "-q", "-am", "reject the build server memory")
    # The host learns something new: the next collect brings that, not the rejected line back.
    service.memory_write("add", "memory", "The VPN endpoint is vpn-2.")
    export(home, tmp_path / "e3", commit=False)
    commit_export(repo, "h1", archive_of(tmp_path / "e3"), "third")
    git(repo, "merge", "-q", "soul/h1")
    merged = path.read_text()
    assert "vpn-2" in merged and "02:00" in merged and "ci-3" not in merged


def test_an_invalid_export_is_never_committed(tmp_path):
    home = make_home(tmp_path / "home")
    export(home, tmp_path / "e1", commit=False)
    (tmp_path / "e1" / learned.FOLDER).mkdir(parents=True)
    (tmp_path / "e1" / learned.FOLDER / "2026-01.jsonl").write_text('{"content": "x", "kind": "gossip"}\n')
    manifest = json.loads((tmp_path / "e1" / "manifest.json").read_text())
    manifest["layered_imports"]["learned"] = [learned.GLOB]
    (tmp_path / "e1" / "manifest.json").write_text(json.dumps(manifest))
    repo, _ = prepare_repo(tmp_path / "soul")
    with pytest.raises(CollectError, match="not a valid layered soul: memories/learned/2026-01.jsonl: .*kind 'gossip'"):
        commit_export(repo, "h1", archive_of(tmp_path / "e1"), "bad")
    assert subprocess.run(["git", "-C", str(repo), "rev-parse", "-q", "--verify", "soul/h1"],
                          capture_output=True, timeout=30).returncode != 0


def test_into_must_be_a_git_repository_or_a_new_folder(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("mine")
    code, out = run_collect("--into", str(plain), "local")
    assert code == 1 and "--into: " in out and "is not a git repository" in out, out
    assert [p.name for p in plain.iterdir()] == ["notes.txt"]
    (tmp_path / "file").write_text("x")
    code, out = run_collect("--into", str(tmp_path / "file"), "local")
    assert code == 1 and "is not a folder" in out, out


# ---------------------------------------------------------------------- the lab
def chown_tree(path, user):
    owner = pwd.getpwnam(user)
    for folder, dirs, files in os.walk(path):
        for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
            os.lchown(name, owner.pw_uid, owner.pw_gid)


def lessons(i: int) -> list[str]:
    return [f"Host {i} learned: the disk array on rack {i} needs a firmware update first.",
            f"Host {i} learned: its backups go to bucket backups-{i}."]


@pytest.fixture(scope="module")
def collect_lab(_ssh_lab_session, tmp_path_factory):
    """Hosts 1-3 deployed (soul.json seeded by the Hermes install), each having learned
    something of its own and one memory they share; a soul repository on the operator."""
    lab = _ssh_lab_session
    reset_to_bare_hermes(lab)
    root = tmp_path_factory.mktemp("soul-collect")
    inventory = lab.write_inventory(root / "inventory.yml", common_vars={"gateway_restart_command": RESTART})
    repo = clone_repo(root / "repo")
    targets = ",".join(h.name for h in lab.hosts[:3])
    code, out = run_update("--yes", "-i", str(inventory), targets, resolve_sha("HEAD", repo), repo=repo)
    assert code == 0, out
    for i, host in enumerate(lab.hosts[:3], 1):
        home = host.home / ".hermes"
        service = MemoryService(SoulFile(home / "soul.json"), embed=False)
        service.memory_write("add", "memory", lessons(i)[0], metadata={"session_id": f"s{i}"})
        with SoulFile(home / "soul.json").change() as graph:
            remember(graph, lessons(i)[1], ["ops"], writer="tool:soul_add", kind="tool_or_workflow_lesson",
                     where="soul_add")
            if i < 3:
                remember(graph, SHARED_TEXT, [], writer="tool:soul_add", kind="routine", where="soul_add")
        service.sync_turn(user=f"Hello from host {i}", assistant="Hi.", session_id=f"s{i}")
        if i == 1:
            service.memory_write("add", "memory", EVIL)
        chown_tree(home, host.user)
    soul_repo = root / "soul"
    soul_repo.mkdir()
    git(soul_repo, "init", "-q", "-b", "main")
    files = {"SOUL.md": "# Fleet agent\n\nCalm, precise, kind.\n", "USER.md": "# User\n\n- The operators are on call in turns.\n",
             "IDENTITY.md": "# Identity\n\nName: fleet-agent\n",
             "manifest.json": json.dumps({"schema": "clawdie.layered-soul.v1", "agent_id": "fleet-agent",
                                          "core_files": {"soul": "SOUL.md", "user": "USER.md", "identity": "IDENTITY.md"},
                                          "layered_imports": {}}, indent=2) + "\n"}
    for name, text in files.items():
        (soul_repo / name).write_text(text)
    git(soul_repo, "add", "-A")
    git(soul_repo, "commit", "-q", "-m", "the fleet's soul")
    yield {"lab": lab, "inventory": inventory, "repo": repo, "soul": soul_repo, "targets": targets,
           "hosts": lab.hosts[:3]}
    lab.heal()


def identity(host) -> str:
    return f"{socket.gethostname()}:{(host.home / '.hermes').resolve()}"


def learned_lines(ctx, host) -> list[dict]:
    text = learned_text(ctx["soul"], f"soul/{host.name}", host.name)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def collect(ctx, *extra):
    return run_collect("-i", str(ctx["inventory"]), "--into", str(ctx["soul"]), *extra, ctx["targets"])


pytestmark_lab = pytest.mark.lab


@pytestmark_lab
def test_collect_from_three_hosts_one_branch_each(collect_lab):
    ctx = collect_lab
    head = git(ctx["soul"], "rev-parse", "HEAD")
    code, out = collect(ctx)
    assert code == 0, out
    assert out.count(": changed — committed ") == 3, out
    rows = {line.split()[0]: line.split() for line in out[out.index("HOST  "):].splitlines()[1:4]}
    assert set(rows) == {h.name for h in ctx["hosts"]} and all(r[2] == "1" and r[3] == "0" for r in rows.values()), out
    assert git(ctx["soul"], "rev-parse", "HEAD") == head and git(ctx["soul"], "status", "--porcelain") == ""
    for i, host in enumerate(ctx["hosts"], 1):
        lines = learned_lines(ctx, host)
        texts = {line["content"] for line in lines}
        assert texts == set(lessons(i)) | ({SHARED_TEXT} if i < 3 else set()), texts
        assert all(line["provenance"]["home"] == identity(host) for line in lines)
        by_text = {line["content"]: line for line in lines}
        assert by_text[lessons(i)[0]]["provenance"]["source"] == "hermes:memory_tool:memory"
        assert by_text[lessons(i)[0]]["provenance"]["session"] == f"s{i}"
        assert by_text[lessons(i)[1]]["kind"] == "tool_or_workflow_lesson"
        subject = git(ctx["soul"], "log", "-1", "--format=%s%n%b", f"soul/{host.name}")
        assert subject.startswith(f"soul collect: {host.name} at 20"), subject
        assert f"{len(lines)} learned memories" in subject and "release " in subject, subject
    # Neither the flagged memory nor a conversation turn left any host.
    for host in ctx["hosts"]:
        found = subprocess.run(["git", "-C", str(ctx["soul"]), "grep", "-I", "-e", "Ignore all previous",
                                "-e", "Hello from host", f"soul/{host.name}"], capture_output=True, text=True, timeout=60)
        assert found.returncode == 1 and not found.stdout, found.stdout
    assert "1 flagged" in out and "2 conversation turns" in out, out


@pytestmark_lab
def test_a_second_collect_without_news_commits_nothing(collect_lab):
    ctx = collect_lab
    tips = {h.name: git(ctx["soul"], "rev-parse", f"soul/{h.name}") for h in ctx["hosts"]}
    code, out = collect(ctx)
    assert code == 0 and out.count("nothing new since the last collect") == 3, out
    assert {h.name: git(ctx["soul"], "rev-parse", f"soul/{h.name}") for h in ctx["hosts"]} == tips


@pytestmark_lab
def test_merged_memories_spread_with_soul_and_a_hosts_own_change_nothing_on_it(collect_lab):
    ctx = collect_lab
    soul_repo = ctx["soul"]
    git(soul_repo, "merge", "-q", "--no-edit", *(f"soul/{h.name}" for h in ctx["hosts"]))
    manifest = json.loads((soul_repo / "manifest.json").read_text())
    manifest["layered_imports"] = {"learned": ["hosts/*/memories/learned/*.jsonl"]}
    (soul_repo / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    git(soul_repo, "commit", "-q", "-am", "spread what the hosts learned")
    own_before = {}
    for i, host in enumerate(ctx["hosts"], 1):
        graph = SoulFile(host.home / ".hermes" / "soul.json").graph()
        own_before[host.name] = {n.id: (n.content, n.status, n.writer, n.kind) for n in graph.nodes.values()
                                 if n.content in lessons(i) or n.content == SHARED_TEXT}
    code, out = run_update("--yes", "-i", str(ctx["inventory"]), "--soul", str(soul_repo), ctx["targets"],
                           resolve_sha("HEAD", ctx["repo"]), repo=ctx["repo"])
    assert code == 0, out
    for i, host in enumerate(ctx["hosts"], 1):
        graph = SoulFile(host.home / ".hermes" / "soul.json").graph()
        active = [n for n in graph.nodes.values() if n.status == "active"]
        for j, other in enumerate(ctx["hosts"], 1):
            for text in lessons(j):
                holding = [n for n in active if n.content == text]
                assert len(holding) == 1, (host.name, text, holding)
                if j != i:  # another host's memory: typed, with where it was learned
                    node = holding[0]
                    assert node.writer == "import" and learned.TAG in node.tags
                    assert node.metadata["learned"]["home"] == identity(other)
        assert len([n for n in active if n.content == SHARED_TEXT]) == 1
        # This host's own memories: the same nodes, untouched.
        now = {n.id: (n.content, n.status, n.writer, n.kind) for n in graph.nodes.values()
               if n.content in lessons(i) or (n.content == SHARED_TEXT and i < 3)}
        assert now == own_before[host.name], host.name
        assert not any("Ignore all previous" in n.content for n in graph.nodes.values()) or i == 1


@pytestmark_lab
def test_after_spreading_nothing_changes_and_nothing_comes_back(collect_lab):
    ctx = collect_lab
    before = {h.name: snapshot(h.home) for h in ctx["hosts"]}
    code, out = run_update("--yes", "-i", str(ctx["inventory"]), "--soul", str(ctx["soul"]), ctx["targets"],
                           resolve_sha("HEAD", ctx["repo"]), repo=ctx["repo"])
    assert code == 0 and "layered soul imported: ok" in out, out
    assert {h.name: snapshot(h.home) for h in ctx["hosts"]} == before
    # The memories a host was given are not its learning: its next export carries the same
    # learned memories (only the identity files the import wrote are new in it).
    lines = {h.name: learned_lines(ctx, h) for h in ctx["hosts"]}
    code, out = collect(ctx)
    assert code == 0, out
    assert {h.name: learned_lines(ctx, h) for h in ctx["hosts"]} == lines
    for host in ctx["hosts"]:
        changed = git(ctx["soul"], "diff", "--name-only", f"soul/{host.name}^", f"soul/{host.name}").split()
        assert changed and set(changed) <= {f"hosts/{host.name}/{name}" for name in ("SOUL.md", "USER.md", "IDENTITY.md")}, changed
    code, out = collect(ctx)
    assert code == 0 and out.count("nothing new since the last collect") == 3, out


@pytestmark_lab
def test_an_unreachable_host_is_said_and_the_others_are_collected(collect_lab):
    ctx = collect_lab
    lab, down = ctx["lab"], ctx["hosts"][2]
    lab.stop(down)
    try:
        code, out = collect(ctx)
    finally:
        lab.start(down)
    assert code == 4, out
    assert f"{down.name}: unreachable" in out and out.count("nothing new since the last collect") == 2, out


@pytestmark_lab
def test_a_changed_host_key_is_refused_and_nothing_is_committed_for_it(collect_lab):
    ctx = collect_lab
    lab, target = ctx["lab"], ctx["hosts"][1]
    tip = git(ctx["soul"], "rev-parse", f"soul/{target.name}")
    lab.tamper_known_hosts(target)
    try:
        code, out = collect(ctx, "--limit", target.name)
    finally:
        lab.heal()
    assert code == 4 and "HOST KEY CHANGED" in out, out
    assert git(ctx["soul"], "rev-parse", f"soul/{target.name}") == tip
