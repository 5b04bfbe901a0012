"""The synthetic scale ledger: deterministic, well formed, replayable."""

from __future__ import annotations

import json

from soulgraph.eval.__main__ import main
from soulgraph.eval.ledger import check_ledger
from soulgraph.eval.replay import replay_ledger
from soulgraph.eval.report import ledger_report, ledger_text
from soulgraph.eval.synthetic import synthetic_ledger


def test_same_seed_same_ledger_other_seed_other_ledger():
    assert synthetic_ledger(300, seed=7) == synthetic_ledger(300, seed=7)
    assert synthetic_ledger(300, seed=7) != synthetic_ledger(300, seed=8)


def test_shape_and_replay():
    raw = synthetic_ledger(1500, seed=3)
    assert len(raw) == 1500 and len({t["id"] for t in raw}) == 1500
    ledger = check_ledger(raw)
    # Only cycles may be refused; every id, time and dep is well formed.
    assert ledger.problems.counts == {}
    result = replay_ledger(ledger, ["recent", "bm25", "related"])
    report = ledger_report(ledger, result)
    assert report["scores"]["built_on"]["long_range"]["questions"] > 50
    assert report["scores"]["waiting_on"]["all"]["questions"] > 0
    assert result.stats["updates"] > 0 and len(result.sizes) == len(result.latencies["bm25"])
    assert "1,000-4,999 nodes" in ledger_text(report)  # latency by graph size once it grows


def test_cli_writes_a_ledger(tmp_path, capsys):
    out = tmp_path / "synth.json"
    assert main(["synth", str(out), "--tasks", "50", "--seed", "2"]) == 0
    assert json.loads(out.read_text()) == synthetic_ledger(50, seed=2)
