"""The word index's image beside a soul file (`soul.json.index`): a cache a load reads instead
of building the index (`engine/index_image.py` says what it holds and when it is used).

Like the vectors file it is derived data: never backed up, never needed. A missing, unreadable
or stale image only means the next load builds the index; an image that cannot be written (a
read-only folder, a full disk) is left unwritten, and the soul is untouched either way.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from soulgraph.store.atomic import write_atomically

SUFFIX = ".index"
MAX_BYTES = 1 << 30  # a larger file is not an image this runtime wrote: not read

logger = logging.getLogger(__name__)


def index_path(soul_path: Path) -> Path:
    return soul_path.with_name(soul_path.name + SUFFIX)


class IndexFile:
    """Reads and writes one soul's index image (`engine/index_image.ImageStore`)."""

    def __init__(self, soul_path: Path):
        self.soul_path = soul_path
        self.path = index_path(soul_path)

    def read(self) -> bytes | None:
        try:
            with open(self.path, "rb") as handle:
                if os.fstat(handle.fileno()).st_size > MAX_BYTES:
                    return None
                return handle.read()
        except OSError:
            return None

    def write(self, image: bytes) -> None:
        """Replace the image (atomically: a reader sees the old one or the new); on failure,
        leave it and say so in the log. It holds the memories' words: the soul file's mode."""
        try:
            mode = os.stat(self.soul_path).st_mode & 0o666
        except OSError:
            mode = 0o600
        try:
            write_atomically(self.path, image, mode=mode)
        except OSError as exc:
            logger.info("the word index's image %s was not written (%s); the next load builds the index", self.path, exc)
