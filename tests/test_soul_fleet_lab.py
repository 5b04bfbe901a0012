"""`fleet-update --soul REPO[@REF]` against the real SSH lab: the layered soul repository is a bare
git repository on a lab host, cloned over SSH with the lab's known_hosts (and refused with a
tampered key); the hosts import it into their Hermes homes (one made by `hermes setup`), and the
real Hermes CLI lists the imported skill. Bad repositories are refused before any host changes.

The tests build on each other, in order, like test_fleet_lab.py.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass

import pytest

from fleet.build import resolve_sha
from soulgraph.store import SoulFile
from tests import hermes_client
from tests.fleet_helpers import clone_repo, reset_to_bare_hermes, run_fleet, run_update, snapshot
from tests.test_soulrepo_import import FILES, MANIFEST, commit, git

pytestmark = pytest.mark.lab
RESTART = 'echo restart >> "$HOME/gateway-restarts"'


def chown_tree(path, user):
    owner = pwd.getpwnam(user)
    for folder, dirs, files in os.walk(path):
        for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
            os.lchown(name, owner.pw_uid, owner.pw_gid)


@pytest.fixture(scope="module")
def soul_lab(_ssh_lab_session, tmp_path_factory, hermes_exe):
    """Hosts 1-3 are deployed to (host 1's Hermes home made by `hermes setup`); host 5 serves
    the soul repository over SSH as a bare repository in its user's home."""
    lab = _ssh_lab_session
    reset_to_bare_hermes(lab)
    root = tmp_path_factory.mktemp("soul-fleet")
    real = lab.hosts[0]
    shutil.rmtree(real.home / ".hermes")
    hermes_client.make_hermes_home(real.home / ".hermes")
    chown_tree(real.home / ".hermes", real.user)
    inventory = lab.write_inventory(root / "inventory.yml", common_vars={"gateway_restart_command": RESTART})
    # The soul: made in a working copy, pushed to a bare repository on the serving host.
    server = lab.hosts[4]
    work = root / "soul-work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    # Objects kept and sent without zlib (core.compression 0), here and in the served repository:
    # the 50 MB session file below is random bytes that would not shrink, and compressing it at
    # each commit, push and clone was most of that case's time. The files are the same.
    git(work, "config", "core.compression", "0")
    first = commit(work, {**FILES, "manifest.json": json.dumps(MANIFEST, indent=2) + "\n"})
    bare = server.home / "soul.git"
    shutil.rmtree(bare, ignore_errors=True)
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True, timeout=60)
    subprocess.run(["git", "-C", str(bare), "config", "core.compression", "0"], check=True, timeout=60)
    git(work, "push", "-q", str(bare), "main")
    chown_tree(bare, server.user)
    url = f"ssh://{server.user}@{server.address}{bare}"
    yield {"lab": lab, "inventory": inventory, "repo": clone_repo(root / "repo"), "work": work, "bare": bare,
           "url": url, "first": first, "targets": ",".join(h.name for h in lab.hosts[:3]), "server": server}
    lab.heal()


def push(ctx, files, branch="main", base="main"):
    """A commit on `branch` (started from `base`) in the served repository; returns its sha.
    A value is the file's text, None to delete it, bytes, or `Link(target)` for a symlink."""
    work, bare = ctx["work"], ctx["bare"]
    git(work, "checkout", "-q", "-B", branch, base)
    for relative, value in files.items():
        path = work / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(value, Link):
            path.symlink_to(value.target)
        elif isinstance(value, bytes):
            path.write_bytes(value)
    sha = commit(work, {k: v for k, v in files.items() if v is None or isinstance(v, str)},
                 message=f"soul change on {branch}")
    chown_tree(bare, "root")  # git refuses to write a repository another user owns
    try:
        git(work, "push", "-q", "--force", str(bare), branch)
    finally:
        chown_tree(bare, ctx["server"].user)
        git(work, "checkout", "-q", "main")
    return sha


@dataclass(frozen=True)
class Link:
    target: str


def update(ctx, *args):
    sha = resolve_sha("HEAD", ctx["repo"])
    return run_update("--yes", "-i", str(ctx["inventory"]), "--soul-key", str(ctx["lab"].key), *args,
                      ctx["targets"], sha, repo=ctx["repo"])


def soul_column(output):
    lines = output[output.index("HOST  "):].splitlines()
    at = lines[0].split().index("SOUL")
    return {line.split()[0]: line.split()[at] for line in lines[1:] if line.strip() and not line.startswith("Problems")
            and len(line.split()) > at}


def hosts(ctx):
    return ctx["lab"].hosts[:3]


def test_deploy_with_a_soul_served_over_ssh(soul_lab):
    ctx = soul_lab
    code, out = update(ctx, "--soul", ctx["url"] + "@main")
    assert code == 0, out
    assert f"soul: ssh://{ctx['server'].address}{ctx['bare']}@{ctx['first'][:12]} (main), valid" in out
    assert soul_column(out) == {h.name: ctx["first"][:12] for h in hosts(ctx)}, out
    real = hosts(ctx)[0].home / ".hermes"
    assert (real / "SOUL.md").read_text() == FILES["SOUL.md"]  # Hermes' default persona replaced
    assert (real / "skills/ops/fleet-deploy/SKILL.md").read_text() == FILES["skills/ops/fleet-deploy/SKILL.md"]
    listed = hermes_client.skills_list(real)
    assert "fleet-deploy" in listed.names, listed.output
    origin = f"ssh://{ctx['server'].address}{ctx['bare']}"  # the user name is not kept
    graph = SoulFile(real / "soul.json").graph()
    imported = [n for n in graph.nodes.values() if "import" in n.metadata]
    assert len(imported) == 8
    assert {n.source for n in imported} >= {f"import:{origin}@{ctx['first']}:memories/curated/ops.md"}
    for h in hosts(ctx):  # the tree on the host is the checkout, not a clone: no .git, no remote
        tree = h.home / ".soulfleet" / "souls" / ctx["first"]
        assert (tree / "manifest.json").is_file() and not (tree / ".git").exists()
        assert pwd.getpwuid((h.home / ".hermes" / "soul.json").stat().st_uid).pw_name == h.user


def test_status_and_verify_show_the_soul_commit(soul_lab):
    ctx = soul_lab
    code, out = run_fleet("status", "-i", str(ctx["inventory"]), ctx["targets"])
    assert code == 0 and out.count(f"soul={ctx['first'][:12]}") == 3, out
    code, out = run_fleet("verify", "-i", str(ctx["inventory"]), "--soul", ctx["url"], "--soul-key",
                          str(ctx["lab"].key), ctx["targets"])
    assert code == 0, out
    assert "layered_soul" in out and "3/3 hosts passed every check" in out


def test_a_second_run_changes_nothing(soul_lab):
    ctx = soul_lab
    before = {h.name: snapshot(h.home) for h in hosts(ctx)}
    code, out = update(ctx, "--soul", ctx["url"])
    assert code == 0, out
    assert "layered soul imported: ok" in out and "changed" not in out.split("HOST  ")[0].replace("CHANGED", ""), out
    assert {h.name: snapshot(h.home) for h in hosts(ctx)} == before


def test_a_new_commit_shows_its_diff_in_check_mode_then_supersedes(soul_lab):
    ctx = soul_lab
    second = push(ctx, {"memories/curated/ops.md": FILES["memories/curated/ops.md"].replace("db-7", "db-9")})
    before = {h.name: snapshot(h.home) for h in hosts(ctx)}
    code, out = update(ctx, "--check", "--diff", "--soul", ctx["url"])
    assert code == 0, out
    assert "+memories/curated/ops.md #1: The staging database is db-9 in the Frankfurt region." in out
    assert "(superseded): The staging database is db-7 in the Frankfurt region." in out
    assert {h.name: snapshot(h.home) for h in hosts(ctx)} == before  # check mode: nothing, not even a tree

    code, out = update(ctx, "--soul", ctx["url"])
    assert code == 0 and soul_column(out) == {h.name: second[:12] for h in hosts(ctx)}, out
    graph = SoulFile(hosts(ctx)[1].home / ".hermes" / "soul.json").graph()
    old = next(n for n in graph.nodes.values() if "db-7" in n.content)
    assert old.status == "superseded" and "db-9" in graph.get(old.superseded_by).content
    assert sorted(p.name for p in (hosts(ctx)[1].home / ".soulfleet" / "souls").iterdir()) == [second]
    code, out = run_fleet("verify", "-i", str(ctx["inventory"]), "--soul", f"{ctx['url']}@{ctx['first']}",
                          "--soul-key", str(ctx["lab"].key), ctx["targets"])
    assert code == 2 and f"the imported soul is {second[:12]}, expected {ctx['first'][:12]}" in out, out


BAD = {
    "no manifest": ({"manifest.json": None}, "manifest.json: missing"),
    "another schema": ({"manifest.json": json.dumps({**MANIFEST, "schema": "other.soul.v2"})}, "schema is 'other.soul.v2'"),
    "a glob escaping the repo": ({"manifest.json": json.dumps({**MANIFEST, "layered_imports": {"memory": ["../*.md"]}})},
                                 "must be a relative path inside the repository"),
    "a secret in a curated memory": ({"memories/curated/keys.md": "- The deploy key is AKIAZ3QXJ5LRTNOPQR7S.\n"},
                                     "holds a secret"),
}


@pytest.mark.parametrize("case", [*BAD, "a symlink pointing outside", "a 50 MB session file", "a ref that does not exist"])
def test_bad_soul_repositories_are_refused_before_any_host_changes(soul_lab, case):
    ctx = soul_lab
    before = {h.name: snapshot(h.home) for h in hosts(ctx)}
    ref = "bad-" + case.replace(" ", "-")
    if case in BAD:
        files, reason = BAD[case]
        push(ctx, files, ref)
    elif case == "a symlink pointing outside":
        reason = "leads outside the repository"
        push(ctx, {"memories/curated/passwd.md": Link("/etc/passwd")}, ref)
    elif case == "a 50 MB session file":
        reason = "larger than 2 MiB"
        push(ctx, {"sessions/2026-11-01.json": os.urandom(50 << 20)}, ref)
    else:
        ref, reason = "no-such-branch", "no commit, branch or tag 'no-such-branch'"

    code, out = update(ctx, "--soul", f"{ctx['url']}@{ref}")

    assert code == 1, out
    assert "Error: --soul:" in out and reason in out, out
    assert "Update to" not in out  # refused before the run began
    assert {h.name: snapshot(h.home) for h in hosts(ctx)} == before


def test_a_tampered_host_key_on_the_soul_remote_is_refused(soul_lab):
    ctx = soul_lab
    lab = ctx["lab"]
    before = {h.name: snapshot(h.home) for h in hosts(ctx)}
    lab.tamper_known_hosts(ctx["server"])
    try:
        code, out = update(ctx, "--soul", ctx["url"])
    finally:
        lab.heal()
    assert code == 1, out
    assert "the SSH host key was refused (it changed since it was recorded" in out, out
    assert {h.name: snapshot(h.home) for h in hosts(ctx)} == before
