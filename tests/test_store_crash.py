"""kill -9 a writer of soul.json at random moments, forty times: every acknowledged write
survives with its edges, pins and uses, and the write in flight is all there or not at all.

The long run (a thousand kills on 10k nodes) is `bench/bench_store.py crash`.
"""

from __future__ import annotations

from tests.crash_harness import CrashConfig, run_crash


def test_kill_minus_nine_loses_no_acknowledged_write_and_half_applies_none(tmp_path):
    config = CrashConfig(nodes=2000, kills=40, seed=11)
    report = run_crash(tmp_path / "soul.json", config)
    summary = "\n".join(report.problems)
    assert report.lost == 0, summary
    assert report.half_applied == 0, summary
    assert report.unreadable == 0 and report.child_errors == 0 and report.check_failures == 0, summary
    assert report.kills >= 35, f"only {report.kills} of 40 writers were killed mid-run"
    assert report.writes >= 40, f"only {report.writes} acknowledged writes: the kills came too early to test much"
    assert report.final_nodes == 2000 + report.writes + report.landed_unacked
    assert report.landed_unacked <= report.kills
    # Some kills must have hit a compaction (a rewrite of soul.json) or come right after one.
    assert report.compactions >= 1
    assert report.kills_mid_compaction + report.kills_after_compaction >= 1
