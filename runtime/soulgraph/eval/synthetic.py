"""A synthetic task ledger of any size, the same for the same seed.

It exists to measure scale — replay time and how the per-question cost grows with
the graph — not recall: its words are made up, so its recall figures mean little.
Its shape follows what agent task ledgers look like: plans of 3-12 tasks created
seconds apart in one project, each task built on earlier steps of its plan, some on
an older task of the project (long range), a few on a later step of their own plan
(waiting on), and a handful of updates over the following days. Titles have two
topic words of their project and one to four words drawn by a Zipf law over a made-up
vocabulary. The Zipf law starts at rank 10, as if stopwords had been removed: then the
commonest word is in about 5% of titles and a title has about 5 words, as in the real
ledgers in data/ (commonest title word in 5-9% of EIP and KEP titles, 4 words a title).
"""

from __future__ import annotations

import itertools
import random
from datetime import datetime, timezone
from typing import Any

START = datetime(2024, 1, 1, tzinfo=timezone.utc).timestamp()
ZIPF_OFFSET = 10
_SYLLABLES = "ka lo mi nu pe ra si to vu za be co di fa gu he ji ko lu ma ne po qi ru sa te vi wo xu ye".split()


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    seen: dict[str, None] = {}
    while len(seen) < size:
        seen["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))] = None
    return list(seen)


def synthetic_ledger(tasks: int, seed: int = 1, projects: int = 40, vocabulary: int = 20_000) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    words = _vocabulary(rng, vocabulary)
    zipf = [1.0 / (rank + ZIPF_OFFSET) for rank in range(len(words))]
    cumulative = list(itertools.accumulate(zipf))
    topics = {p: rng.sample(words, 30) for p in range(projects)}
    by_project: dict[int, list[int]] = {p: [] for p in range(projects)}
    ledger: list[dict[str, Any]] = []
    now = START
    while len(ledger) < tasks:
        now += rng.expovariate(1 / 1800.0)  # a new plan every half hour on average
        project = rng.randrange(projects)
        plan: list[int] = []
        for _step in range(min(rng.randint(3, 12), tasks - len(ledger))):
            now += rng.uniform(1, 20)
            title_words = rng.sample(topics[project], 2) + rng.choices(words, cum_weights=cumulative, k=rng.randint(1, 4))
            deps = [ledger[i]["id"] for i in plan[-2:] if rng.random() < 0.6]
            history = by_project[project]
            if history and rng.random() < 0.15:
                # An older foundation, more often a recent one; the new title echoes it.
                old = ledger[history[-1 - min(int(rng.expovariate(1 / 50.0)), len(history) - 1)]]
                deps.append(old["id"])
                title_words += rng.sample(old["title"].split(), 2)
            index = len(ledger)
            updates = sorted(now + rng.uniform(60, 5 * 86400) for _ in range(rng.choice((0, 0, 1, 2, 4))))
            ledger.append({
                "id": f"T{index + 1}",
                "title": " ".join(title_words),
                "created_at": _iso(now),
                "updated_at": [_iso(u) for u in updates],
                "deps": list(dict.fromkeys(deps)),
                "project": f"p{project}",
            })
            plan.append(index)
            history.append(index)
        # Now and then an early step waits on a later one of the same plan.
        if len(plan) > 2 and rng.random() < 0.1:
            early, late = ledger[plan[0]], ledger[plan[-1]]
            if early["id"] not in late["deps"]:
                early["deps"].append(late["id"])
    return ledger
