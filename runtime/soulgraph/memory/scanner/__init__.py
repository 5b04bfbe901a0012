"""The write-time scanner: every write path runs `scan()` (or `refuse_secrets()`) before
anything reaches the soul graph.

Two kinds of finding. A `secret` is a credential that must never be stored: the writer is
refused (`SecretRefused`) and told which rule fired, never the secret. An `injection` is
text that tries to steer whatever model later reads the memory back (fake instructions,
role headers, hidden characters, exfiltration links); it is reported, and the write path
decides what to do with it (flag, quarantine, refuse).

Pure and small: standard library only, no network, no state. Each rule is gated by a few
literal keywords (on an ASCII text, by whole words: one set operation over the detector's
word split), so a typical note runs few patterns; every pattern starts with a literal and
bounds its variable parts, and a rule stops after `MAX_FINDINGS_PER_RULE` findings, so 100 KB
of hostile text scans in tens of milliseconds (tests/test_scanner.py checks it grows linearly;
docs/scanner.md has the measured cost). `RULES` is the table below in code.

Each rule module documents its rules in a table (rule id, kind, where its facts come from)
and its judgment calls: `secrets` and `injections`.
"""

from __future__ import annotations

import bisect
import re
import itertools

from soulgraph.memory.scanner import classifier, normalise
from soulgraph.memory.scanner.injections import INJECTION_RULES
from soulgraph.memory.scanner.matching import (INJECTION, LONG_TEXT, SECRET, Finding, Rule, ScanResult, SecretRefused,
                                               pieces, unspaced)
from soulgraph.memory.scanner.normalise import Folded, encoded_spans, fold
from soulgraph.memory.scanner.secrets import SECRET_RULES, find_secrets

__all__ = ["Finding", "ScanResult", "Rule", "RULES", "SecretRefused", "scan", "refuse_secrets", "status", "SECRET",
           "INJECTION"]

DETECTOR = Rule("injection-detector", INJECTION,
                "reads like prompt injection to the scanner's detector (a linear model over words)",
                "bench/train_injection_model.py, trained on the public attack corpora's dev split",
                (), lambda text, low: ())  # not a pattern: scan() asks classifier.flags
RULES: dict[str, Rule] = {r.id: r for r in SECRET_RULES + INJECTION_RULES + [DETECTOR]}

MAX_FINDINGS_PER_RULE = 100
"""A rule stops after this many findings in one text: enough to refuse or flag it and to
show where, and a bound on the work a hostile text can cause (50,000 zero-width spaces)."""


def _run(rules: list[Rule], text: str, low: str | None, folded: str,
         words: frozenset[str] | set[str] | None = None) -> list[Finding]:
    """Run rules in priority order; a finding overlapping an earlier-kept one is dropped.
    `words`: for an ASCII `folded`, which of the rules' gate words are words of it (the rules
    with word gates are gated by those; None: by their keywords). Kept spans never overlap,
    so sorted by start they are sorted by end too: one bisect finds the only kept span that
    could overlap a new one."""
    kept: list[Finding] = []
    starts: list[int] = []
    ends: list[int] = []
    hay = pieces(folded) if len(folded) > LONG_TEXT else None
    for rule in rules:
        if hay is not None and rule.keywords:
            for keyword in rule.keywords:
                if keyword in (hay if keyword in _UNSPACED else folded):
                    break
            else:
                continue
        elif words is not None and rule.words is not None:
            if rule.words.isdisjoint(words):
                for literal in rule.literals:
                    if literal in folded:
                        break
                else:
                    continue
        else:
            for keyword in rule.keywords:
                if keyword in folded:
                    break
            else:
                if rule.keywords:
                    continue
        count = 0
        for start, end in rule.find(text, low):
            i = bisect.bisect_left(starts, end)
            if end <= start or (i and ends[i - 1] > start):
                continue
            starts.insert(i, start)
            ends.insert(i, end)
            kept.append(Finding(rule.kind, rule.id, rule.description, start, end))
            count += 1
            if count == MAX_FINDINGS_PER_RULE:
                break
    return kept


_GATE_WORDS = frozenset().union(*(r.words for r in INJECTION_RULES if r.words))
_UNSPACED = frozenset(k for r in INJECTION_RULES for k in r.keywords if unspaced(k))


def _gate_words(folded: str, words: list[str]) -> set[str] | None:
    """The rules' gate words among `words` (the detector's split of `folded`), when that split
    covers all of an ASCII text; else None (the keywords gate)."""
    if folded.isascii() and len(folded) <= classifier.MAX_FEATURE_CHARS and len(words) < classifier.MAX_FEATURE_WORDS:
        return _GATE_WORDS.intersection(words)
    return None


def scan(text: str) -> ScanResult:
    """Scan one text for secrets and prompt injection. Pure; never raises on a str.

    The rules read the text as written, then as a model reads it (normalise.fold: one
    spelling for full-width, accented, confusable, invisible-laced and leetspeak letters),
    then every stretch hidden in an encoding, decoded; the detector (classifier.py) reads the
    folded text and the decoded stretches. A finding made on a reading other than the text as
    written says so in `via`, and its span is the stretch of the original it came from."""
    if not isinstance(text, str):
        raise TypeError(f"scan() takes a str, not {type(text).__name__}")
    found = _scan(text, decode=True)
    if not found:
        return _CLEAN
    if len(found) > 1:
        found.sort(key=lambda f: (f.start, f.end, f.rule))
    return ScanResult(tuple(found))


_CLEAN = ScanResult()


def _scan(text: str, *, decode: bool) -> list[Finding]:
    if not text:
        return []
    lowered = text.lower()
    low = lowered if len(lowered) == len(text) else None  # "İ" lower-cases to two characters
    findings = find_secrets(text, low, lowered)
    plain = None
    if not text.isascii():  # folding keeps ASCII as it is
        plain = fold(text, lower=False)
        if plain.text != text:  # full-width or invisible-laced keys
            findings += _moved(find_secrets(plain.text, None, plain.text.lower()), plain, text, findings)
    read = fold(text, lowered=lowered, plain=plain)
    words = classifier.words(read.text)  # the detector's, and the rules' gate words
    gate = _gate_words(read.text, words)
    if read.text == lowered:
        findings += _run(INJECTION_RULES, text, low, lowered, gate)
    else:
        findings += _run(INJECTION_RULES, text, low, lowered,
                         _gate_words(lowered, classifier.words(lowered)) if lowered.isascii() else None)
        findings += _moved(_run(INJECTION_RULES, read.text, read.text, read.text, gate), read, text, findings)
    if decode:
        findings += _decoded(text, findings)
    if REDACTED in text:  # the mark a writer left where it cut a secret out is no secret itself
        findings = [f for f in findings if not (f.kind == SECRET and _at_redaction(text, f))]
    # The detector judges what the rules let through; a text with a secret is refused anyway.
    if not findings and classifier.flags(read.text, words):
        findings.append(Finding(INJECTION, DETECTOR.id, DETECTOR.description, 0, len(text)))
    return findings


REDACTED = "[secret removed: "
"""How `memory.write.redact_secrets` marks a cut: "Bearer [secret removed: np.http.2]" reads like a
token to some rule sets' patterns, and a turn whose secret was cut out must not be refused for
the mark."""


def _at_redaction(text: str, finding: Finding) -> bool:
    """Whether a secret finding is (or starts inside) a redaction mark, and ends at its close."""
    start = text.find(REDACTED, max(0, finding.start - 80), finding.end + len(REDACTED))
    if start < 0 or start > finding.end:
        return False
    close = text.find("]", start)
    # Before the mark only a name and an assignment may lie ("client_secret=[secret removed: …]").
    return (close >= 0 and finding.end <= close + 2
            and re.fullmatch(r"[\w .-]*[:=]?\s*['\"]?", text[finding.start:start]) is not None)


MAX_ENCODED_SPANS = 64  # encoded stretches read per text (their decoded text is bounded too: normalise)


def _decoded(text: str, kept: list[Finding]) -> list[Finding]:
    """Findings in the stretches hidden in an encoding, all decoded texts read in one scan
    (a line each), each finding moved to the encoded stretch it came from."""
    spans = encoded_spans(text, MAX_ENCODED_SPANS)
    if not spans:
        return []
    starts, texts, at = [], [], 0
    for _start, _end, decoded, _encoding in spans:
        starts.append(at)
        texts.append(decoded)
        at += len(decoded) + 1
    out: list[Finding] = []
    covered = _Spans(kept)
    for found in _scan("\n".join(texts), decode=False):
        start, end, _decoded_text, encoding = spans[bisect.bisect_right(starts, found.start) - 1]
        if not covered.overlap(found.rule, start, end):
            covered.add(found.rule, start, end)
            out.append(Finding(found.kind, found.rule, found.description, start, end, encoding))
    return out


def _moved(found: list[Finding], folded: Folded, text: str, kept: list[Finding]) -> list[Finding]:
    """Findings made on the folded text, moved to the original's spans; those a finding of
    the same rule already covers are dropped."""
    out: list[Finding] = []
    if not found:
        return out
    covered = _Spans(kept)
    for finding in found:
        start, end = folded.span(finding.start, finding.end, len(text))
        if not covered.overlap(finding.rule, start, end):
            covered.add(finding.rule, start, end)
            out.append(Finding(finding.kind, finding.rule, finding.description, start, end, "normalised"))
    return out


class _Spans:
    """The spans of some findings by rule, to ask whether one of a rule's overlaps a span: the
    given findings sorted once (a bisect and the furthest end before it), those added later
    looked through (few: most findings on another reading are covered)."""

    def __init__(self, findings: list[Finding]):
        by_rule: dict[str, list[tuple[int, int]]] = {}
        for f in findings:
            by_rule.setdefault(f.rule, []).append((f.start, f.end))
        self.sorted: dict[str, tuple[list[int], list[int]]] = {}
        for rule, spans in by_rule.items():
            spans.sort()
            self.sorted[rule] = ([s for s, _ in spans], list(itertools.accumulate((e for _, e in spans), max)))
        self.added: dict[str, list[tuple[int, int]]] = {}

    def overlap(self, rule: str, start: int, end: int) -> bool:
        known = self.sorted.get(rule)
        if known is not None:
            k = bisect.bisect_left(known[0], end)  # the spans that start before `end`
            if k and known[1][k - 1] > start:
                return True
        return any(s < end and start < e for s, e in self.added.get(rule, ()))

    def add(self, rule: str, start: int, end: int) -> None:
        self.added.setdefault(rule, []).append((start, end))


def status() -> dict[str, object]:
    """What this install's scanner is: its rules, how it folds homoglyphs, and its detector."""
    fold("і")  # load the confusables table, so its source is known
    return {"rules": len(RULES), "confusables": normalise.CONFUSABLES_SOURCE, **classifier.status()}


def refuse_secrets(text: str, where: str) -> ScanResult:
    """Scan `text`; raise `SecretRefused` (naming `where` and the rules, never the secret) if it
    holds a secret; otherwise return the result, whose injections the caller handles."""
    result = scan(text)
    secrets = result.secrets
    if secrets:
        raise SecretRefused(where, secrets)
    return result
