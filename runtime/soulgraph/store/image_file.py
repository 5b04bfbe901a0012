"""A large soul's load image beside it (`soul.json.image`): a cache the next load of the same
snapshot reads instead of parsing the file and building the word index (`engine/load_image.py`
says what it holds and when it is used).

Like the vectors file it is derived data: never backed up, never needed. A missing, unreadable
or stale image only means the next load parses the file; an image that cannot be written (a
read-only folder, a full disk) is left unwritten, and the soul is untouched either way.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from soulgraph.store.atomic import file_signature, write_atomically

SUFFIX = ".image"
MAX_BYTES = 1 << 30  # a larger file is not an image this runtime wrote: not read

logger = logging.getLogger(__name__)


def image_path(soul_path: Path) -> Path:
    return soul_path.with_name(soul_path.name + SUFFIX)


class ImageFile:
    """Reads and writes one soul's load image (`engine/load_image.ImageStore`). `snapshot`: the
    signature of the soul file the image is made from (`atomic.file_signature`); `writable`:
    False for a process that only reads what a server left (a tool, a backup's check)."""

    def __init__(self, soul_path: Path, snapshot: tuple[int, ...] | None = None, writable: bool = True):
        self.soul_path = soul_path
        self.path = image_path(soul_path)
        self.snapshot = snapshot
        self.writable = writable

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
        leave it and say so in the log. It holds the memories: the soul file's mode."""
        if not self.writable:
            return
        try:
            mode = os.stat(self.soul_path).st_mode & 0o666
        except OSError:
            mode = 0o600
        try:
            write_atomically(self.path, image, mode=mode)
        except OSError as exc:
            logger.info("the load image %s was not written (%s); the next load parses the soul file", self.path, exc)
            return
        # A hard forget that replaced the snapshot meanwhile removes the image after its new
        # snapshot is in place; this image is of the old one, and may hold the forgotten text.
        # Looked at after the image is in place, one of the two always removes it.
        try:
            current = file_signature(os.stat(self.soul_path))
        except OSError:
            current = None
        if self.snapshot is not None and current != self.snapshot:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
