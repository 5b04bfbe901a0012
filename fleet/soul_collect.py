"""What each agent learned, gathered for review: the work behind `fleet soul collect [TARGETS] --into REPO` (its command is in fleet/cli.py).

On each host, the deployed release's own `python -m soulgraph.soulrepo export` runs on the Hermes
home the agent runs from (its active profile's, as `fleet status` finds it), into a temporary
folder that is removed in the same command; the tree comes back as a tar archive. On the
operator the tree is validated (`soulrepo validate`), then committed into the git repository REPO
on one branch per host, `soul/<host>`, as the folder `hosts/<host>/`:

- the operator's working tree, index and current branch are never touched (the commit is made
  with a temporary index, and the branch moved only if nobody moved it meanwhile);
- a host's first commit is made on REPO's HEAD, so `git diff main...soul/<host>` shows just
  what that host learned since, and `git merge soul/<host>` brings it into the soul repository;
  every host branch changes its own folder only, so the merges never conflict;
- a memory the operator rejects (its line deleted on main) stays rejected: the next collect
  changes the host branch only where the host changed;
- nothing new on a host (the same export, bar its date): no commit, the host is `ok`.

`fleet-update --soul REPO` then spreads what was merged, once the manifest on main lists the
learned files (`"learned": ["hosts/*/memories/learned/*.jsonl"]`, docs/soul-repo.md).

Every remote command has a deadline; host keys follow the inventory's policy (strict, unless
`--accept-new-host-keys` for a host not yet known). Exit codes as fleet-update: 0 every host ok
or changed, 2 a host failed, 4 a host unreachable, 6 both, 130 interrupted.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import os
import re
import subprocess
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from fleet import hermes_names
from fleet.connections import CommandTimeout, HostConnectionError
from fleet.deploy import INTERRUPTED, UNREACHABLE, HostResult
from fleet.facts import expand_home, gather, sh_path
from fleet.inventory import Host
from fleet.operations import CHANGED, FAILED, OK

EXPORT_TIMEOUT = 300  # seconds: the export on the host, its archive included
GIT_TIMEOUT = 60  # seconds, each git command on the operator
MAX_ARCHIVE = 64 << 20  # bytes of one host's export: a soul is text
HOSTS = "hosts"
BRANCH_PREFIX = "soul/"
MARK = "::soulfleet-collect::"
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class CollectError(Exception):
    """One host's collect cannot go on; the message says why. Nothing was written for it."""


# ---------------------------------------------------------------------------- on the host
def export_command(python: str, hermes_home: str) -> str:
    """Shell: export into a temporary folder, print the JSON report, the marker, then the tree as
    base64 (stdout is text); the folder goes whatever happens."""
    return (
        'd=$(mktemp -d "${TMPDIR:-/tmp}/soulfleet-collect.XXXXXX") || exit 70; trap \'rm -rf "$d"\' EXIT; '
        f'{sh_path(python)} -m soulgraph.soulrepo export --hermes-home {sh_path(hermes_home)} "$d/soul" '
        '--no-commit >"$d/report" 2>"$d/err"; rc=$?; '
        f'cat "$d/report"; echo; echo \'{MARK}\'; '
        'if [ $rc -eq 0 ]; then (cd "$d/soul" && tar -cf - .) | base64 || rc=71; fi; '
        'cat "$d/err" >&2; exit $rc')


def parse_export(stdout: str) -> tuple[dict[str, Any] | None, bytes]:
    text, found, encoded = stdout.partition(MARK)
    if not found:
        return None, b""
    try:
        report = json.loads(text)
    except ValueError:
        report = None
    try:
        archive = base64.b64decode("".join(encoded.split()), validate=True) if encoded.strip() else b""
    except (binascii.Error, ValueError):
        raise CollectError("the export's archive came back garbled (not base64)") from None
    return report, archive


# ---------------------------------------------------------------------------- on the operator
def _git_env() -> dict[str, str]:
    return {**os.environ, "GIT_TERMINAL_PROMPT": "0"}


def git(repo: Path, *args: str, env: dict[str, str] | None = None, check: bool = True,
        work_tree: Path | None = None) -> subprocess.CompletedProcess:
    """`git -C repo ARGS`; with `work_tree`, git runs there on repo's objects and refs instead."""
    where = ["-C", str(repo)] if work_tree is None else [f"--git-dir={repo}", f"--work-tree={work_tree}"]
    try:
        done = subprocess.run(["git", *where, *args], capture_output=True, env=env or _git_env(), cwd=work_tree,
                              timeout=GIT_TIMEOUT, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise CollectError("git is not installed on this machine") from None
    except subprocess.TimeoutExpired:
        raise CollectError(f"git {args[0]} did not finish in {GIT_TIMEOUT} s") from None
    if check and done.returncode != 0:
        raise CollectError(f"git {args[0]} failed: {done.stderr.decode(errors='replace').strip()[:300]}")
    return done


def prepare_repo(path: Path) -> tuple[Path, bool]:
    """REPO as a git repository (made when the folder does not exist yet); (its path, made)."""
    made = not path.exists()
    if made:
        path.mkdir(parents=True)
        git(path, "init", "-q", "-b", "main")
    elif not path.is_dir():
        raise CollectError(f"{path} is not a folder; --into takes a git repository (or a new folder)")
    bare = git(path, "rev-parse", "--is-bare-repository", check=False)
    if not (bare.returncode == 0 and bare.stdout.strip() == b"true"):
        top = git(path, "rev-parse", "--show-toplevel", check=False)
        if top.returncode != 0 or Path(top.stdout.decode().strip()).resolve() != path.resolve():
            raise CollectError(f"{path} is not a git repository (nor the top of its working tree); "
                               "--into takes the soul repository's checkout, or a folder that does not exist yet")
    if git(path, "rev-parse", "-q", "--verify", "HEAD^{commit}", check=False).returncode != 0:
        # No commit yet: an empty first one, so every host branch grows from it and merging
        # several of them needs no --allow-unrelated-histories.
        tree = git(path, "mktree").stdout.decode().strip()
        first = git(path, "commit-tree", tree, "-m", "Soul repository (fleet soul collect)",
                    env=_identity_env(path, _git_env())).stdout.decode().strip()
        branch = git(path, "symbolic-ref", "-q", "HEAD").stdout.decode().strip()
        git(path, "update-ref", branch, first, "")
    return path, made


def branch_name(host: str) -> str:
    return BRANCH_PREFIX + host


def _identity_env(repo: Path, env: dict[str, str]) -> dict[str, str]:
    """The operator's git identity; a stand-in only where git has none configured."""
    if git(repo, "config", "user.email", check=False).returncode != 0 and "GIT_AUTHOR_EMAIL" not in env:
        env.update(GIT_AUTHOR_NAME="soulfleet collect", GIT_AUTHOR_EMAIL="soulfleet@localhost",
                   GIT_COMMITTER_NAME="soulfleet collect", GIT_COMMITTER_EMAIL="soulfleet@localhost")
    return env


def _unpack(archive: bytes, into: Path) -> None:
    if len(archive) > MAX_ARCHIVE:
        raise CollectError(f"the export is {len(archive) >> 20} MiB, more than {MAX_ARCHIVE >> 20} MiB; a soul is text")
    try:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(into, filter="data")
    except (tarfile.TarError, OSError) as exc:  # FilterError (a link leading out) is a TarError
        raise CollectError(f"the export's archive cannot be unpacked: {exc}") from None


def _same_but_date(old: bytes, new: bytes) -> bool:
    """Two manifests that differ only in `updated_at` (every export stamps it)."""
    try:
        a, b = json.loads(old), json.loads(new)
    except ValueError:
        return False
    return isinstance(a, dict) and isinstance(b, dict) and \
        {k: v for k, v in a.items() if k != "updated_at"} == {k: v for k, v in b.items() if k != "updated_at"}


def commit_export(repo: Path, host: str, archive: bytes, message: str) -> str | None:
    """Commit the export as hosts/<host>/ on branch soul/<host>; the new commit, or None when the
    host's folder would not change. Validated first: an invalid tree is never committed."""
    from soulgraph.soulrepo.validate import validate  # the runtime's own check of a soul tree

    folder = f"{HOSTS}/{host}"
    branch = f"refs/heads/{branch_name(host)}"
    with tempfile.TemporaryDirectory(prefix="soulfleet-collect-") as temp:
        stage = Path(temp) / "stage"
        tree_dir = stage / folder
        tree_dir.mkdir(parents=True)
        _unpack(archive, tree_dir)
        checked = validate(tree_dir)
        if not checked.ok:
            raise CollectError("the export is not a valid layered soul: "
                               + "; ".join(str(p) for p in checked.problems[:5]))
        found = git(repo, "rev-parse", "-q", "--verify", branch + "^{commit}", check=False)
        parent = found.stdout.decode().strip() if found.returncode == 0 else None
        if parent is None:  # the first collect of this host: on REPO's HEAD (if it has one)
            head = git(repo, "rev-parse", "-q", "--verify", "HEAD^{commit}", check=False)
            parent = head.stdout.decode().strip() if head.returncode == 0 else None
            old = None
        else:
            old = parent
        if parent is not None:
            before = git(repo, "show", f"{parent}:{folder}/manifest.json", check=False)
            manifest = tree_dir / "manifest.json"
            if before.returncode == 0 and _same_but_date(before.stdout, manifest.read_bytes()):
                manifest.write_bytes(before.stdout)  # the date alone is no news
        env = _identity_env(repo, {**_git_env(), "GIT_INDEX_FILE": str(Path(temp) / "index")})
        if parent is not None:
            git(repo, "read-tree", parent, env=env)
        git_dir = Path(git(repo, "rev-parse", "--absolute-git-dir").stdout.decode().strip())
        # The host's folder as exported, and nothing else: a file gone from the export goes.
        git(git_dir, "add", "-A", "-f", "--", folder, env=env, work_tree=stage)
        tree = git(repo, "write-tree", env=env).stdout.decode().strip()
        if parent is not None and git(repo, "rev-parse", f"{parent}^{{tree}}").stdout.decode().strip() == tree:
            if old is None:  # nothing to commit, but the host gets its branch all the same
                git(repo, "update-ref", branch, parent, "")
            return None
        made = git(repo, "commit-tree", tree, *(("-p", parent) if parent else ()), "-m", message,
                   env=env).stdout.decode().strip()
        # Moved only from where we found it: a collect running beside this one is not overwritten.
        moved = git(repo, "update-ref", branch, made, old or "", check=False)
        if moved.returncode != 0:
            raise CollectError(f"{branch_name(host)} moved while this collect ran (another collect?); "
                               "nothing was written for this host; run it again")
        return made


def summary(report: dict[str, Any]) -> str:
    found = report.get("learned") or {}
    left = found.get("left_out") or {}
    reasons = ", ".join(f"{count} {why}" for why, count in sorted(left.items(), key=lambda x: (-x[1], x[0])))
    if report.get("learned") is None:
        return "no soul graph in the home: files only"
    return f"{found.get('exported', 0)} learned memories; left out: {reasons or 'none'}"


def collect_host(host: Host, repo: Path, git_lock: threading.Lock, line: Callable[[str], None],
                 should_stop: Callable[[], bool] = lambda: False, clock=time.time) -> HostResult:
    started = time.monotonic()
    result = HostResult(host.name, OK)

    def fail(message: str) -> HostResult:
        result.status, result.message = FAILED, message
        result.counts[FAILED] += 1
        line(f"{host.name}: soul | {message}")
        return result

    conn = host.connection()
    try:
        if not SAFE_NAME.fullmatch(host.name):
            return fail(f"the host name {host.name!r} cannot name a folder and a branch (letters, digits, . _ -)")
        facts = gather(conn, host.vars)
        result.facts, result.sha = facts, facts["deployed_sha"]
        if not facts["deployed_sha"]:
            return fail("no runtime release is deployed here (run fleet-update first): nothing to export with")
        if should_stop():
            result.status, result.message = INTERRUPTED, "stopped by Ctrl-C before the export"
            return result
        runtime_dir = expand_home(str(host.vars["runtime_dir"]), facts["home"])
        python = f"{runtime_dir}/releases/{facts['deployed_sha']}/venv/bin/python"
        home = hermes_names.resolve(expand_home(str(host.vars["hermes_home"]), facts["home"]), facts["home"],
                                    facts.get("active_profile")).home
        done = conn.run(export_command(python, home), timeout=EXPORT_TIMEOUT)
        report, archive = parse_export(done.stdout)
        if done.rc != 0 or report is None or not archive:
            why = "; ".join((report or {}).get("problems") or []) or (done.stderr.strip().splitlines() or [""])[-1]
            return fail(f"export on the host failed (exit {done.rc}): {why[:500] or 'no output'}")
        result.counts[OK] += 1
        told = summary(report)
        line(f"{host.name}: soul | export of {home}: ok — {told}")
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock()))
        message = (f"soul collect: {host.name} at {stamp}\n\n{told}.\n"
                   f"Hermes home {home}, release {facts['deployed_sha'][:12]}.\n")
        with git_lock:  # one host's commit at a time: the branches are separate, the object store is one
            made = commit_export(repo, host.name, archive, message)
        if made is None:
            result.counts[OK] += 1
            line(f"{host.name}: soul | {branch_name(host.name)}: ok — nothing new since the last collect")
            result.notes.append(f"{branch_name(host.name)}: unchanged ({told})")
        else:
            result.counts[CHANGED] += 1
            result.status = CHANGED
            line(f"{host.name}: soul | {branch_name(host.name)}: changed — committed {made[:12]}")
            result.notes.append(f"{branch_name(host.name)} {made[:12]}: {HOSTS}/{host.name}/, {told}")
    except HostConnectionError as exc:
        result.status, result.message = UNREACHABLE, str(exc)
    except CommandTimeout as exc:
        fail(str(exc))
    except CollectError as exc:
        fail(str(exc))
    finally:
        conn.close()
        result.seconds = time.monotonic() - started
    return result
