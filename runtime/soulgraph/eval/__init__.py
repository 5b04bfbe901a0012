"""The evaluation harness: does the soul graph recall the right things?

- `ledger`: load and check a task ledger; `replay`: replay it through a soul graph at
  its own timestamps, asking every retrieval method *built on* and *waiting on*
  questions before each task is added.
- `locomo`: LoCoMo conversations, one node per dialogue turn, scored by evidence recall.
- `retrievers`: the compared methods; `bm25`: Okapi BM25; `scoring`: recall, MRR,
  the long-range split; `report`: text tables and JSON; `synthetic`: a seeded
  ledger generator for scale runs.

Run it with ``python -m soulgraph.eval ledger FILE`` or ``python -m soulgraph.eval locomo FILE``.
"""
