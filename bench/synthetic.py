"""A deterministic synthetic soul graph of any size, for benchmarks.

Words follow Zipf's law (s = 1) over a 20,000-word vocabulary: the commonest word is
about 9% of all words, as common as "eip" in EIP titles, and most words are rare; each node is built on one or two
earlier nodes, mostly recent ones, as plan decompositions are.
"""

from __future__ import annotations

import bisect
import itertools
import random
import time

from soulgraph.engine.graph import DAY, SoulGraph

VOCABULARY = [f"w{i}" for i in range(20000)]
# Cumulative Zipf weights, for drawing ranks with bisect.
_CUMULATIVE = list(itertools.accumulate(1 / rank for rank in range(1, len(VOCABULARY) + 1)))
PROJECTS = [f"project:p{i}" for i in range(20)]


class StepClock:
    def __init__(self, start: float = 1_700_000_000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now


def sentence(rng: random.Random, n_words: int) -> str:
    total = _CUMULATIVE[-1]
    return " ".join(VOCABULARY[bisect.bisect_left(_CUMULATIVE, rng.random() * total)] for _ in range(n_words))


def build(n_nodes: int, seed: int = 1) -> SoulGraph:
    rng = random.Random(seed)
    # End near the real now, so a server loading the file sees recent and old memories.
    clock = StepClock(time.time() - n_nodes * 120 - DAY / 4)
    graph = SoulGraph(clock=clock)
    for i in range(n_nodes):
        clock.now += rng.expovariate(1 / 120)  # a node every two minutes on average
        parents = []
        if i:
            for _ in range(rng.choice((1, 1, 2))):
                # Mostly recent parents, sometimes an old foundation.
                back = int(rng.expovariate(1 / 20)) if rng.random() < 0.8 else rng.randrange(i)
                parents.append(f"n{max(1, i - back)}")
        graph.add(sentence(rng, rng.randint(6, 16)), [rng.choice(PROJECTS)], parents=parents)
        if rng.random() < 0.3:
            graph.splay(f"n{rng.randint(max(1, i - 50), i + 1)}")
    clock.now += DAY / 4
    return graph


def questions(n: int, seed: int = 2) -> list[str]:
    rng = random.Random(seed)
    return [sentence(rng, rng.randint(3, 8)) for _ in range(n)]


def make_vectors(soul_file) -> str | None:
    """Write the soul's vectors file, as a host has it from the memory service's first start on,
    so that what a bench measures does not run beside a background embedding of every memory.
    Returns None when the vectors are ready, else why they are not (no `embed` extra, …)."""
    from soulgraph.store import SoulFile
    from soulgraph.store.vectors import VectorStore, vectors_path

    store = VectorStore(vectors_path(soul_file), background=False)
    if store.ready(SoulFile(soul_file).graph()):
        return None
    return store.status().get("reason", "unknown")
