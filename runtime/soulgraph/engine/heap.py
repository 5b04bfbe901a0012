"""Handing the C heap's freed memory back to the system.

glibc's malloc keeps what is freed for later use, so a large structure freed below ones
still held (a load's temporary arrays and strings, the posting sets a word's mask replaces)
stays resident until the heap is trimmed. Elsewhere nothing is done.
"""

from __future__ import annotations

from typing import Any

_malloc_trim: Any = None  # glibc's malloc_trim once looked up, False where there is none


def give_back_freed_memory() -> None:
    """Return the memory freed inside the C heap to the system (glibc's malloc_trim; elsewhere
    nothing). At 100,000 memories: 48 MB a vectors load left behind
    (bench/bench_vectors_memory.py), 42 MB of posting sets the common words' masks replace."""
    global _malloc_trim
    if _malloc_trim is None:
        _malloc_trim = False
        try:
            import ctypes

            _malloc_trim = ctypes.CDLL(None).malloc_trim
        except (OSError, AttributeError):
            pass
    if _malloc_trim:
        _malloc_trim(0)
