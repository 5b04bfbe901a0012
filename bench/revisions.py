"""A temporary checkout of another revision, for the benchmarks that compare this tree with
a baseline in the same invocation."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def worktree(base: str | None) -> Iterator[Path | None]:
    """A git worktree of `base`, removed afterwards (None: no baseline, yields None)."""
    if not base:
        yield None
        return
    with tempfile.TemporaryDirectory() as folder:
        tree = Path(folder) / "base"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(tree), base], check=True,
                       timeout=120)
        try:
            yield tree
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], timeout=120)
