"""Two real MCP servers on one soul.json (Hermes' CLI and gateway): a write acknowledged by
one is seen at once by the other, and no write is lost.

Two rounds: one call at a time (each write checked at once on the other server), and two
drivers at once, one per server (each read must show what the other driver had acknowledged
before the read was sent). The long run (10k nodes, thousands of operations, against one
server alone as the baseline, with throughput) is `bench/bench_store.py share`.
"""

from __future__ import annotations

from tests.share_harness import ShareConfig, prepare_and_share


def test_two_servers_see_each_others_writes_at_once_and_lose_none(tmp_path):
    config = ShareConfig(servers=2, ops=240, seconds=40.0, seed=7, call_timeout=30.0)
    report = prepare_and_share(tmp_path / "soul.json", 2000, config)
    summary = "\n".join(report.problems)
    assert report.errors == 0, summary
    assert report.stale == 0, summary
    assert report.lost == 0, summary
    assert report.ops >= 100, f"only {report.ops} operations in {report.seconds:.1f} s"
    assert report.checks == report.writes >= 50
    for kind in ("add", "link", "pin", "splay", "soul_summary", "soul_discover"):
        assert report.by_kind.get(kind, 0) > 0, f"the workload never did {kind}: {report.by_kind}"


def test_two_servers_driven_at_once_read_nothing_stale_and_lose_nothing(tmp_path):
    config = ShareConfig(servers=2, concurrent=True, ops=300, seconds=20.0, seed=11, call_timeout=30.0)
    report = prepare_and_share(tmp_path / "soul.json", 2000, config)
    summary = "\n".join(report.problems)
    assert report.errors == 0, summary
    assert report.stale == 0, summary
    assert report.wrong == 0, summary
    assert report.lost == 0, summary
    assert report.most_in_flight == 2, "the two drivers never had calls in flight at the same time"
    assert report.ops >= 100, f"only {report.ops} operations in {report.seconds:.1f} s"
    assert report.writes >= 50 and report.reads >= 30
    assert report.checks >= 20, f"only {report.checks} reads of the other driver's writes were checked"
    for kind in ("add", "link", "pin", "splay", "soul_query", "soul_prime", "soul_discover", "soul_summary"):
        assert report.by_kind.get(kind, 0) > 0, f"the workload never did {kind}: {report.by_kind}"
