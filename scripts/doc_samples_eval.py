"""The generated samples of the evaluation page (docs/eval.md): what `python -m soulgraph.eval …`
and the bench scripts print on the shared data sets. `scripts/doc_samples.py` registers `SAMPLES`
from here; tests/test_doc_samples.py checks each marked block.

The data sets are read where the harness's bench scripts find them, `../shared/data` beside this
checkout (they are licensed apart and never enter the repository); without them a sample is not
made (`SampleSkipped`, which the test turns into a skip, or a failure in CI). The commands run
from the checkout, as the page says; a page's `.venv/bin/python` is this interpreter, and its
`/work/shared/data` the data folder wherever it is.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
SHOWN_DATA = "/work/shared/data"  # the data folder, as the page names it in absolute paths
TIMEOUT = 180.0  # seconds, each command (the slowest shown takes about 25 s)


def _eval(session, shown: str, *, needs: str) -> str:
    """Run `shown` (a command line as the page prints it) from the checkout and add it and its
    output to the sample; `needs`: the data file it reads, relative to the data folder."""
    import doc_samples

    if not (DATA / needs).is_file():
        raise doc_samples.SampleSkipped(f"the evaluation data {DATA / needs} is not here")
    command = shown.replace(".venv/bin/python", sys.executable).replace(SHOWN_DATA, str(DATA))
    before = len(session.lines)
    out = session.run(command, shown=shown, cwd=ROOT, timeout=TIMEOUT)
    session.lines[before + 1:] = [line.replace(str(DATA), SHOWN_DATA) for line in session.lines[before + 1:]]
    return out


def _ledger(name: str) -> Callable:
    def sample(session) -> str:  # docs/eval.md: the ledger replayed with the default methods
        _eval(session, f".venv/bin/python -m soulgraph.eval ledger {SHOWN_DATA}/ledgers/{name}_ledger.json",
              needs=f"ledgers/{name}_ledger.json")
        return session.text()
    return sample


def locomo(session) -> str:
    """docs/eval.md: LoCoMo dev with the default methods."""
    _eval(session, f".venv/bin/python -m soulgraph.eval locomo {SHOWN_DATA}/locomo/locomo-dev.json",
          needs="locomo/locomo-dev.json")
    return session.text()


def locomo_hybrid(session) -> str:
    """docs/eval.md: LoCoMo dev, recall's steps one by one and the vectors."""
    _eval(session, f".venv/bin/python -m soulgraph.eval locomo {SHOWN_DATA}/locomo/locomo-dev.json "
          "--methods bm25,related,recall_before,recall,hybrid,hybrid_related", needs="locomo/locomo-dev.json")
    return session.text()


def ledgers_hybrid(session) -> str:
    """docs/eval.md: the three ledgers with the same methods, their long-range table each."""
    _eval(session, "for f in peps eips keps; do .venv/bin/python -m soulgraph.eval ledger "
          f"{SHOWN_DATA}/ledgers/${{f}}_ledger.json --methods bm25,related,recall_before,recall,recall_related,"
          "hybrid,hybrid_related | sed -n '1p;/^Long-range/,/^$/p'; done", needs="ledgers/eips_ledger.json")
    return session.text()


def crowd(session) -> str:
    """docs/eval.md: LoCoMo dev asked inside one store of the five conversations."""
    _eval(session, ".venv/bin/python bench/crowd_locomo.py --size 2900", needs="locomo/locomo-dev.json")
    return session.text()


def supersede(session) -> str:
    """docs/eval.md: PEPs' and KEPs' replaced proposals, with and without the lifecycle."""
    _eval(session, "for f in peps keps; do .venv/bin/python -m soulgraph.eval supersede "
          "../shared/data/ledgers/${f}_ledger.json; done", needs="ledgers/peps_ledger.json")
    return session.text()


def provider(session) -> str:
    """docs/eval.md: LoCoMo dev through the Hermes memory provider."""
    _eval(session, f".venv/bin/python -m soulgraph.eval provider {SHOWN_DATA}/locomo/locomo-dev.json",
          needs="locomo/locomo-dev.json")
    return session.text()


def provider_users(session) -> str:
    """docs/eval.md: one soul for many users: alone, together and crowd."""
    _eval(session, f".venv/bin/python -m soulgraph.eval provider {SHOWN_DATA}/locomo/locomo-dev.json "
          "--users all --limit 10", needs="locomo/locomo-dev.json")
    return session.text()


SAMPLES: dict[str, Callable] = {
    "eval-eips": _ledger("eips"),
    "eval-peps": _ledger("peps"),
    "eval-keps": _ledger("keps"),
    "eval-locomo": locomo,
    "eval-locomo-hybrid": locomo_hybrid,
    "eval-ledgers-hybrid": ledgers_hybrid,
    "eval-crowd": crowd,
    "eval-supersede": supersede,
    "eval-provider": provider,
    "eval-provider-users": provider_users,
}
