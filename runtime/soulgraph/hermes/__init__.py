"""Everything that knows Hermes: its home and profiles, config.yaml edits, seeding a soul
graph from its memory files, the soul-graph skill, and the installer that ties them up."""
