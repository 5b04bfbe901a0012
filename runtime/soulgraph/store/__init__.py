"""Where a soul graph lives between sessions: soul.json, written atomically and shared
safely between processes (see soulfile.py for the guarantees)."""

from soulgraph.store.soulfile import (EAGER_LOAD_BYTES, FORMAT, SCHEMA, SoulFile, SoulFileError,
                                      decode, default_soul_file)

__all__ = ["EAGER_LOAD_BYTES", "FORMAT", "SCHEMA", "SoulFile", "SoulFileError", "decode", "default_soul_file"]
