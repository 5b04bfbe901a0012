"""Every command-output sample of README.md and docs/, by name.

The samples live by page: this checkout's own set-ups and the README's, backup.md's, memories.md's
and hermes-install.md's in doc_samples.py (which also holds the machinery: Session, normalised,
the markers); docs/reference/'s in doc_reference.py; the how-to pages' in doc_samples_pages.py;
docs/eval.md's in doc_samples_eval.py; the fleet's, on the SSH lab, in doc_samples_lab.py. Each
of those imports doc_samples; only this module imports them all, for scripts/refresh_docs.py and
tests/test_doc_samples.py.
"""

from __future__ import annotations

import doc_reference
import doc_samples
import doc_samples_eval
import doc_samples_lab
import doc_samples_pages

SAMPLES = {**doc_samples.SAMPLES, **doc_reference.SAMPLES, **doc_samples_pages.SAMPLES, **doc_samples_eval.SAMPLES,
           **doc_samples_lab.SAMPLES}
LAB = doc_samples_lab.LAB  # the samples that need the SSH lab


def make(name: str) -> str:
    return doc_samples.make(name, SAMPLES)
