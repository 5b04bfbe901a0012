"""A person's view of an agent's memory, and their corrections to it: the library under
`python -m soulgraph.memories` (and, later, its web page).

    from soulgraph.memories import Filters, open_target, reading, changes
    target = open_target(hermes_home="~/.hermes")
    graph = target.soul.graph()
    for node in reading.listing(graph, Filters(kinds=("preference",)), limit=20): ...
    changes.edit(target, "n12", content="Priya moved to Lisbon", reason="she moved")

- target.py: which soul (a Hermes home's, or a soul file) and where its markdown files are;
- reading.py: list, search (the served recall: scopes, flags, supersedes as the tools have
  them), show and history; nothing is written;
- changes.py: edit, pin, unpin, archive, unarchive, forget: each one change of the store
  under the writers' lock (so servers and the gateway may run meanwhile), through the one
  write path (memory/write.py and memory/lifecycle.py) and into the audit trail;
- shown.py: a memory as a person sees it (a flagged one withheld unless asked for);
- text.py: those as lines for a terminal.
"""

from soulgraph.memories.reading import Filters
from soulgraph.memories.target import MemoriesError, Target, open_target

__all__ = ["Filters", "MemoriesError", "Target", "open_target"]
