"""The generated samples of the how-to and explanation pages (docs/soul-repo.md, docs/soul-graph.md,
docs/memory-provider.md, docs/hermes-install.md, docs/backup.md, docs/fleet.md) that the README's
own set-ups in scripts/doc_samples.py do not cover. `scripts/doc_samples.py` registers `SAMPLES`
from here; tests/test_doc_samples.py checks each marked block.
"""

from __future__ import annotations

from typing import Callable

SAMPLES: dict[str, Callable] = {}
