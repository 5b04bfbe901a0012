"""Helpers for the fleet tests: run the CLI in-process, make commits, snapshot lab hosts."""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import subprocess
from pathlib import Path

from click.testing import CliRunner

from fleet.build import REPO
from fleet.cli import fleet, fleet_update

MINIMAL_CONFIG = "model:\n  default: test-model\n"


def reset_to_bare_hermes(lab) -> None:
    """Every lab host back to a bare Hermes home (a minimal config.yaml owned by its user) and
    no runtime, as a host looks before its first deploy."""
    lab.heal()
    for host in lab.hosts:
        for folder in (".soulfleet", ".hermes"):
            shutil.rmtree(host.home / folder, ignore_errors=True)
        (host.home / "gateway-restarts").unlink(missing_ok=True)
        hermes = host.home / ".hermes"
        hermes.mkdir(mode=0o700)
        (hermes / "config.yaml").write_text(MINIMAL_CONFIG)
        owner = pwd.getpwnam(host.user)
        for path in (hermes, hermes / "config.yaml"):
            shutil.chown(path, owner.pw_uid, owner.pw_gid)


def run_update(*args: str, repo: Path | str = REPO) -> tuple[int, str]:
    result = CliRunner().invoke(fleet_update, ["--repo", str(repo), *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def run_fleet(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(fleet, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def git(repo: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


def clone_repo(dest: Path) -> Path:
    """A throw-away clone of this repository at its HEAD commit, to make new shas in."""
    head = git(REPO, "rev-parse", "HEAD")
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(REPO), str(dest)], check=True)
    git(dest, "checkout", "-q", head)
    return dest


def commit_file(repo: Path, relpath: str, text: str, message: str) -> str:
    (repo / relpath).write_text(text)
    git(repo, "add", relpath)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def snapshot(home: Path) -> dict[str, str]:
    """Every file under a host's .hermes and .soulfleet (except the venvs' insides): content
    hashes and link targets, to prove a run changed nothing."""
    seen: dict[str, str] = {}
    for top in (home / ".hermes", home / ".soulfleet"):
        if not top.exists():
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = [d for d in dirnames if d not in ("venv", "wheels")]
            for name in dirnames + filenames:
                path = Path(dirpath) / name
                key = str(path.relative_to(home))
                if path.is_symlink():
                    seen[key] = "-> " + os.readlink(path)
                elif path.is_file():
                    seen[key] = hashlib.sha256(path.read_bytes()).hexdigest()
                else:
                    seen[key] = "dir"
    return seen
