"""Where a soul graph lives between sessions: soul.json (the snapshot) and
soul.json.journal (every change since, one durable record each). See soulfile.py for the
guarantees, `python -m soulgraph.store` for the operator's check, compact and export."""

from soulgraph.store.snapshot import FORMAT, SCHEMA
from soulgraph.store.soulfile import EAGER_LOAD_BYTES, ChangeKept, ForgetIncomplete, NotSynced, SoulFile, SoulFileError, default_soul_file

__all__ = ["ChangeKept", "EAGER_LOAD_BYTES", "FORMAT", "ForgetIncomplete", "NotSynced", "SCHEMA", "SoulFile", "SoulFileError", "default_soul_file"]
