"""`--soul REPO[@REF]`: the layered soul repository, fetched once on the operator.

The repository is cloned read-only (bare, into a temporary folder) and REF resolved to a
commit; the tree at that commit is extracted with `git archive` (no `.git`, no remote, no
credentials) and validated with the runtime's own `soulrepo validate`. An invalid tree stops
the run before any host is touched. Hosts receive that tree as a tar archive and import it
(the `soul` role, fleet/operations/soul_import.py).

SSH remotes get the fleet's host-key policy: OpenSSH with `StrictHostKeyChecking=yes` against
the fleet's known_hosts file only (`accept-new` with --accept-new-host-keys: a new host is
recorded, a changed key is still refused), `BatchMode=yes` (never a prompt), a connect
timeout and keepalives; every git command has a deadline.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from soulgraph.soulrepo.importer import strip_credentials
from soulgraph.soulrepo.validate import validate

GIT_TIMEOUT = 120  # seconds: the clone; every other git command takes far less
CONNECT_TIMEOUT = 15  # seconds: SSH connection set-up
MAX_TREE_BYTES = 64 << 20  # a soul is text; a bigger tree is refused before it is unpacked


class SoulSourceError(Exception):
    """The soul repository cannot be used; nothing was changed on any host."""


@dataclass(frozen=True)
class SoulSpec:
    repo: str  # as given: a URL, scp-like user@host:path, or a local folder
    ref: str  # a branch, tag or commit ("HEAD" when not given)

    @property
    def origin(self) -> str:
        """What provenance records: the repository without credentials."""
        return strip_credentials(self.repo if "://" in self.repo or _scp_like(self.repo)
                                 else str(Path(self.repo).expanduser().absolute()))


def _scp_like(repo: str) -> bool:
    return re.match(r"^[^/@:]+@[^/:]+:", repo) is not None or re.match(r"^[A-Za-z0-9.-]+:(?!//)", repo) is not None \
        and not Path(repo).exists()


def parse_soul(value: str) -> SoulSpec:
    """`REPO[@REF]`. The `@` of a user (`git@host:x`, `ssh://git@host/x`) is not a ref:
    only an `@` after the repository's path starts counts."""
    value = value.strip()
    if not value:
        raise SoulSourceError("--soul needs a repository (REPO or REPO@REF)")
    scheme = re.match(r"^[a-z][a-z0-9+.-]*://[^/]*", value)
    if scheme:
        path_start = scheme.end()
    elif _scp_like(value):
        path_start = value.index(":") + 1
    else:
        path_start = 0
    at = value.rfind("@", path_start)
    if at <= path_start:
        return SoulSpec(value, "HEAD")
    repo, ref = value[:at], value[at + 1:]
    if not repo or not ref:
        raise SoulSourceError(f"--soul {value!r}: expected REPO or REPO@REF")
    return SoulSpec(repo, ref)


@dataclass
class SoulTree:
    spec: SoulSpec
    commit: str
    folder: Path  # the extracted tree (no .git)
    archive: Path  # the same tree as a tar file, what hosts receive
    workdir: Path  # remove with close()

    def close(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)


def ssh_command(known_hosts: str | os.PathLike[str], key: str | os.PathLike[str] | None, accept_new: bool) -> str:
    options = [
        "ssh", "-o", "BatchMode=yes", "-o", f"StrictHostKeyChecking={'accept-new' if accept_new else 'yes'}",
        "-o", f"UserKnownHostsFile={Path(known_hosts).expanduser()}", "-o", "GlobalKnownHostsFile=/dev/null",
        "-o", f"ConnectTimeout={CONNECT_TIMEOUT}", "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
    ]
    if key:
        options += ["-i", str(Path(key).expanduser()), "-o", "IdentitiesOnly=yes"]
    return shlex.join(options)


def _git(*args: str, env: dict[str, str], cwd: Path | None = None, timeout: float = GIT_TIMEOUT,
         what: str = "git") -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", *args], capture_output=True, env=env, cwd=cwd, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise SoulSourceError("git is not installed on the operator (needed for --soul)") from None
    except subprocess.TimeoutExpired:
        raise SoulSourceError(f"{what} did not finish in {timeout:g} s") from None


def _explain(stderr: str, spec: SoulSpec, known_hosts: str) -> str:
    text = stderr.strip()
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in text or "Host key verification failed" in text:
        changed = "HAS CHANGED" in text
        return (f"{spec.repo}: the SSH host key was refused ({'it changed since it was recorded' if changed else 'the host is not in'} "
                f"{known_hosts}{'' if changed else '; --accept-new-host-keys records a new host'}); nothing was fetched")
    lines = [line for line in text.splitlines() if line.strip()]
    return f"cannot clone {spec.repo}: {lines[-1] if lines else 'git clone failed'}"


def fetch(spec: SoulSpec, *, known_hosts: str | os.PathLike[str] = "~/.ssh/known_hosts",
          key: str | os.PathLike[str] | None = None, accept_new: bool = False) -> SoulTree:
    """Clone, resolve the ref, extract and validate; a SoulSourceError says what is wrong."""
    workdir = Path(tempfile.mkdtemp(prefix="soulfleet-soul-"))
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/false", "SSH_ASKPASS": "/bin/false",
           "GIT_SSH_COMMAND": ssh_command(known_hosts, key, accept_new), "GIT_CONFIG_NOSYSTEM": "1",
           "LC_ALL": "C"}
    env.pop("GIT_SSH", None)
    try:
        bare = workdir / "repo.git"
        cloned = _git("clone", "--bare", "--quiet", "--no-tags", "--", spec.repo, str(bare), env=env,
                      what=f"cloning {spec.repo}")
        if cloned.returncode != 0:
            raise SoulSourceError(_explain(cloned.stderr.decode("utf-8", "replace"), spec, str(known_hosts)))
        if spec.ref != "HEAD" and _git("fetch", "--quiet", "--tags", "origin", env=env, cwd=bare,
                                       what="fetching tags").returncode != 0:
            pass  # tags are a convenience; branches and commits came with the clone
        resolved = _git("rev-parse", "--verify", "--quiet", f"{spec.ref}^{{commit}}", env=env, cwd=bare,
                        timeout=30)
        if resolved.returncode != 0:
            raise SoulSourceError(f"{spec.repo}: no commit, branch or tag {spec.ref!r}; nothing was changed")
        commit = resolved.stdout.decode().strip()
        archive = workdir / f"soul-{commit[:12]}.tar"
        made = _git("archive", "--format=tar", f"--output={archive}", commit, env=env, cwd=bare, timeout=60,
                    what="git archive")
        if made.returncode != 0:
            raise SoulSourceError(f"git archive {commit[:12]} failed: {made.stderr.decode('utf-8', 'replace').strip()}")
        folder = workdir / "tree"
        _extract(archive, folder)
        report = validate(folder)
        if not report.ok:
            raise SoulSourceError(f"{spec.repo}@{commit[:12]} is not a valid layered soul; no host was touched:\n"
                                  + "\n".join(f"  {problem}" for problem in report.problems))
        return SoulTree(spec, commit, folder, archive, workdir)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise


def _extract(archive: Path, folder: Path) -> None:
    """Unpack git's tar of the tree: regular files, folders and symlinks only (the validator
    then refuses symlinks that lead outside), nothing above `folder`, within MAX_TREE_BYTES."""
    if archive.stat().st_size > MAX_TREE_BYTES:
        raise SoulSourceError(f"the soul tree is {archive.stat().st_size >> 20} MiB; a layered soul is text "
                              f"(at most {MAX_TREE_BYTES >> 20} MiB)")
    folder.mkdir()
    with tarfile.open(archive) as tar:
        try:
            tar.extractall(folder, filter="data")
        except tarfile.FilterError as exc:  # e.g. a symlink to /etc/passwd or ../..
            raise SoulSourceError(f"the soul tree holds {exc.tarinfo.name!r}, which leads outside the repository "
                                  "(a symlink or an absolute path); no host was touched") from None


def describe(tree: SoulTree) -> str:
    named = f" ({tree.spec.ref})" if tree.spec.ref not in ("HEAD", tree.commit) else ""
    return f"{tree.spec.origin}@{tree.commit[:12]}{named}"
