"""Memory as a record that can be corrected: the write-time scanner and the write guard every
write passes, the one write path, the lifecycle and its audit, recall's ranking, scopes, flagged
memories, upkeep and the bounded snapshot for the prompt.

Importing it installs the write guard in the store (store/write_guard.py): every graph a
SoulFile holds from then on scans what is written to it. The store itself imports nothing from
here."""

from soulgraph.memory import guard as _guard
from soulgraph.store import write_guard as _write_guard

_write_guard.install(_guard.Policy())
