"""The leak probe (bench/probe_scopes.py) in the suite: users tell private facts through Hermes'
own MemoryManager and our provider, then everyone asks everyone's questions; any other user's
word in a system prompt block, a prefetch or a tool answer is a leak. 0 is the only pass."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import probe_scopes  # noqa: E402


def test_no_user_ever_reads_another_users_memory(hermes_exe, tmp_path):
    report = probe_scopes.probe(users=6, facts=3, tool_scopes=2, folder=tmp_path)
    assert report["leaks"] == {"system prompt block": 0, "prefetch": 0, "tools (shared server)": 0,
                               "tools (a user's server)": 0}, report
    assert report["cross_user_confirmations"] == 0 and report["green_tea_memories"] == 6
    assert report["user_scopes"] == 6
    # Isolation is not bought with forgetting: each user's own facts and the shared memory come back.
    assert report["own_words_back"] == report["own_words"] == 18, report
    assert report["shared_reached"] == 6, report
