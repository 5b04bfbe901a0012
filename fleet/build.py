"""The runtime build on the operator: the soulgraph wheel at a sha, and a wheelhouse per platform.

1. `git archive <sha> runtime/` of this repository, so only committed code ships (a dirty work
   tree never leaks into a release), then `pip wheel` of runtime/ → soulgraph-*.whl.
2. Its dependencies as wheels for the target OS, CPU and Python (`pip download --platform`),
   so hosts install with `pip --no-index` and never need a package index.

Both are cached under ~/.cache/soulfleet (SOULFLEET_CACHE): the wheel per sha, the dependency
wheels per (runtime/pyproject.toml content, platform), the finished wheelhouse per (sha, platform).
A cached entry is written to a temporary folder and renamed into place, so a killed build never
leaves a half-filled cache entry.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

def default_repo() -> Path:
    """The soulfleet repository the runtime is built from: the checkout this package runs from,
    else (an installed operator package, pip or pipx) the current directory."""
    checkout = Path(__file__).resolve().parent.parent
    return checkout if (checkout / ".git").exists() else Path.cwd()


REPO = default_repo()
GIT_TIMEOUT = 120  # seconds, each git command on the operator
MODEL_FOLDER = "runtime/model"  # the soulgraph-model package: the vectors' model files


class BuildError(Exception):
    pass


def cache_root() -> Path:
    return Path(os.environ.get("SOULFLEET_CACHE", "~/.cache/soulfleet")).expanduser()


def _git(repo: Path, *args: str, binary: bool = False):
    try:
        proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, timeout=GIT_TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise BuildError("git is not installed on the operator (the runtime is built from a git commit)") from None
    except subprocess.TimeoutExpired:
        raise BuildError(f"git {' '.join(args)} in {repo} did not finish in {GIT_TIMEOUT} s") from None
    if proc.returncode != 0:
        raise BuildError(f"git {' '.join(args)} in {repo}: {proc.stderr.decode().strip()}")
    return proc.stdout if binary else proc.stdout.decode().strip()


def resolve_sha(ref: str = "HEAD", repo: Path = REPO) -> str:
    """The full commit sha for a ref in the repository; BuildError when it names no commit."""
    repo = Path(repo)
    try:
        inside = repo.is_dir() and _git(repo, "rev-parse", "--is-inside-work-tree") == "true"
    except BuildError:
        inside = False
    if not inside:
        raise BuildError(f"{repo} is not a git repository: the runtime is built from a commit of the soulfleet "
                         "repository, so run from a checkout of it or pass --repo PATH")
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except BuildError:
        raise BuildError(f"{ref!r} is not a commit in {repo}") from None


def pip_platforms(platform: str, arch: str) -> list[str]:
    """pip --platform tags for a host (pip widens each to the older compatible versions)."""
    if platform == "macos":
        arch = "arm64" if arch in ("arm64", "aarch64") else "x86_64"
        return [f"macosx_11_0_{arch}", "macosx_11_0_universal2"]
    arch = "aarch64" if arch in ("arm64", "aarch64") else arch
    return [f"manylinux_2_28_{arch}", f"manylinux2014_{arch}"]


def platform_key(platform: str, arch: str, python_version: str) -> str:
    return f"{platform}-{arch}-py{python_version}"


def _publish(tmp: Path, final: Path) -> Path:
    try:
        tmp.rename(final)
    except OSError:  # another build got there first: keep theirs
        shutil.rmtree(tmp, ignore_errors=True)
    return final


PIP_TIMEOUT = 900  # seconds: a wheelhouse download on a slow link


def _pip(*args: str) -> None:
    try:
        proc = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True,
                              timeout=PIP_TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise BuildError(f"pip {args[0]} did not finish in {PIP_TIMEOUT} s") from None
    if "No module named pip" in (proc.stderr or ""):
        raise BuildError(f"pip is not installed beside {sys.executable}: the runtime wheel and its wheelhouse "
                         "are built with it (pipx and python -m venv environments have it; uv venv needs --seed)")
    if proc.returncode != 0:
        raise BuildError(f"pip {args[0]} failed:\n{(proc.stderr or proc.stdout)[-3000:]}")


@contextlib.contextmanager
def _step(what: str) -> Iterator[None]:
    """Say on stderr that a build step that takes seconds began, and how long it took: a first
    run (nothing cached) is not a silent minute, and the time is counted where it is spent."""
    started = time.monotonic()
    print(f"build: {what} …", file=sys.stderr, flush=True)
    yield
    print(f"build: {what}: done in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)


class RuntimeBuilder:
    """Builds (or finds in the cache) what a release needs. Safe to call from many threads."""

    def __init__(self, sha: str, repo: Path = REPO, cache: Path | None = None):
        self.sha, self.repo = sha, Path(repo)
        self.cache = cache or cache_root()
        self._lock = threading.Lock()  # guards the two dicts below
        self._key_locks: dict[str, threading.Lock] = {}  # one per platform: they build in parallel
        self._wheelhouses: dict[str, Path] = {}

    def runtime_wheel(self) -> Path:
        # runtime/model/ (the vectors' model, 12 MB) is a package of its own: `model_wheel`.
        return self._wheel(self.cache / "runtime-wheels" / self.sha, "soulgraph-*.whl", "runtime",
                           exclude=MODEL_FOLDER)

    def model_wheel(self) -> Path:
        """The vectors' model (soulgraph-model, from runtime/model/ at the sha), cached by the
        folder's git tree: it changes far less often than the code."""
        try:
            tree = _git(self.repo, "rev-parse", f"{self.sha}:{MODEL_FOLDER}")
        except BuildError:
            raise BuildError(f"{self.sha[:12]} has no {MODEL_FOLDER}/: soul_embed needs a release that ships "
                             "the vectors' model (issue 15 on)") from None
        return self._wheel(self.cache / "model-wheels" / tree, "soulgraph_model-*.whl", MODEL_FOLDER)

    def _wheel(self, folder: Path, pattern: str, source: str, exclude: str | None = None) -> Path:
        """The wheel `pip wheel` makes of the repository's `source` folder at the sha (without
        `exclude`), cached in `folder`: `git archive`, so only committed files ship."""
        wheels = sorted(folder.glob(pattern)) if folder.is_dir() else []
        if wheels:
            return wheels[0]
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name[:12]}-", dir=folder.parent))
        try:
            with _step(f"the {source} wheel at {self.sha[:12]}"):
                self._build_wheel(tmp, source, exclude)
        except BaseException:  # a failure or Ctrl-C: no half-built folder stays in the cache
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _publish(tmp, folder)
        return sorted(folder.glob(pattern))[0]

    def _build_wheel(self, tmp: Path, source: str, exclude: str | None) -> None:
        """`git archive` of `source` at the sha (without `exclude`), made a wheel in `tmp` by pip."""
        src = tmp / "src"
        src.mkdir()
        paths = ["--", source, *([f":(exclude){exclude}"] if exclude else [])]
        tar_path = tmp / "source.tar"
        tar_path.write_bytes(_git(self.repo, "archive", "--format=tar", self.sha, *paths, binary=True))
        with tarfile.open(tar_path) as tar:
            tar.extractall(src, filter="data")
        tar_path.unlink()
        _pip("wheel", "--no-deps", "-q", "-w", str(tmp), str(src / source))
        shutil.rmtree(src)

    def _requirements_key(self) -> str:
        text = _git(self.repo, "show", f"{self.sha}:runtime/pyproject.toml")
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def dependency_wheels(self, platform: str, arch: str, python_version: str, extras: tuple[str, ...] = ()) -> Path:
        """The runtime's dependencies as wheels for a platform, with those of `extras` (e.g. embed)."""
        key = platform_key(platform, arch, python_version) + "".join(f"+{extra}" for extra in sorted(extras))
        folder = self.cache / "dep-wheels" / f"{self._requirements_key()}-{key}"
        if folder.is_dir():
            return folder
        wheel = self.runtime_wheel()
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=folder.parent))
        tags = [arg for tag in pip_platforms(platform, arch) for arg in ("--platform", tag)]
        try:
            with _step(f"the runtime's dependencies as wheels for {key}"):
                _pip("download", "-q", "--only-binary=:all:", *tags, "--python-version",
                     python_version, "--implementation", "cp", "-d", str(tmp),
                     f"{wheel}[{','.join(sorted(extras))}]" if extras else str(wheel),
                     "pip")  # pip itself too, so the venv's pip can be as new as the wheels need
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        for own in tmp.glob("soulgraph-*.whl"):
            own.unlink()
        return _publish(tmp, folder)

    def wheelhouse(self, platform: str, arch: str, python_version: str, extras: tuple[str, ...] = ()) -> Path:
        """The folder shipped to `releases/<sha>/wheels/`: the runtime wheel and its deps (with
        those of the runtime's `extras`; with `embed`, the model's wheel too)."""
        key = platform_key(platform, arch, python_version) + "".join(f"+{extra}" for extra in sorted(extras))
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:  # hosts of one platform wait for its build, never for another platform's
            if key in self._wheelhouses:
                return self._wheelhouses[key]
            folder = self.cache / "wheelhouses" / self.sha / key
            if not folder.is_dir():
                deps = self.dependency_wheels(platform, arch, python_version, extras)
                folder.parent.mkdir(parents=True, exist_ok=True)
                tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=folder.parent))
                own = [self.runtime_wheel(), *([self.model_wheel()] if "embed" in extras else [])]
                for wheel in [*deps.glob("*.whl"), *own]:
                    try:
                        os.link(wheel, tmp / wheel.name)
                    except OSError:
                        shutil.copy2(wheel, tmp / wheel.name)
                _publish(tmp, folder)
            self._wheelhouses[key] = folder
            return folder
