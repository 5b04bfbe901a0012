"""Memory as a record that can be corrected: the typed, sourced fields every node carries
(`record`), the write-time scanner every write path runs, and, as they come, the lifecycle
and the bounded snapshot for the prompt."""
