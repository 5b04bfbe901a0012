"""The generated samples of the evaluation pages (docs/eval.md, docs/embeddings.md): what
`python -m soulgraph.eval …` and the bench scripts print on the shared data sets.
`scripts/doc_samples.py` registers `SAMPLES` from here; tests/test_doc_samples.py checks each
marked block.

The data sets are read where the harness and bench scripts find them, `../shared/data` beside
this checkout (they are licensed apart and never enter the repository); without them a sample
is not made (`SampleSkipped`, which the test turns into a skip, or a failure in CI).
"""

from __future__ import annotations

from typing import Callable

SAMPLES: dict[str, Callable] = {}
