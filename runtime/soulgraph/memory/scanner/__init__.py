"""The write-time scanner: every write path runs `scan()` (or `refuse_secrets()`) before
anything reaches the soul graph.

Two kinds of finding. A `secret` is a credential that must never be stored: the writer is
refused (`SecretRefused`) and told which rule fired, never the secret. An `injection` is
text that tries to steer whatever model later reads the memory back (fake instructions,
role headers, hidden characters, exfiltration links); it is reported, and the write path
decides what to do with it (flag, quarantine, refuse).

Pure and small: standard library only, no network, no state. Each rule is gated by a few
literal keywords, so a typical note runs few patterns (about 20–30 µs for a 300-character
note); every pattern starts with a literal and bounds its variable parts, and a rule stops
after `MAX_FINDINGS_PER_RULE` findings, so 100 KB of hostile text scans in tens of
milliseconds (tests/test_scanner.py holds both checks). `RULES` is the table below in code.

Each rule module documents its rules in a table (rule id, kind, where its facts come from)
and its judgment calls: `secrets` and `injections`.
"""

from __future__ import annotations

import bisect

from soulgraph.memory.scanner.injections import INJECTION_RULES
from soulgraph.memory.scanner.matching import INJECTION, SECRET, Finding, Rule, ScanResult, SecretRefused
from soulgraph.memory.scanner.secrets import SECRET_RULES

__all__ = ["Finding", "ScanResult", "Rule", "RULES", "SecretRefused", "scan", "refuse_secrets", "SECRET", "INJECTION"]

RULES: dict[str, Rule] = {r.id: r for r in SECRET_RULES + INJECTION_RULES}

MAX_FINDINGS_PER_RULE = 100
"""A rule stops after this many findings in one text: enough to refuse or flag it and to
show where, and a bound on the work a hostile text can cause (50,000 zero-width spaces)."""


def _run(rules: list[Rule], text: str, low: str | None, folded: str) -> list[Finding]:
    """Run rules in priority order; a finding overlapping an earlier-kept one is dropped.
    Kept spans never overlap, so sorted by start they are sorted by end too: one bisect
    finds the only kept span that could overlap a new one."""
    kept: list[Finding] = []
    starts: list[int] = []
    ends: list[int] = []
    for rule in rules:
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


def scan(text: str) -> ScanResult:
    """Scan one text for secrets and prompt injection. Pure; never raises on a str."""
    if not isinstance(text, str):
        raise TypeError(f"scan() takes a str, not {type(text).__name__}")
    if not text:
        return ScanResult()
    folded = text.lower()
    low = folded if len(folded) == len(text) else None  # "İ" lower-cases to two characters
    findings = _run(SECRET_RULES, text, low, folded) + _run(INJECTION_RULES, text, low, folded)
    findings.sort(key=lambda f: (f.start, f.end, f.rule))
    return ScanResult(tuple(findings))


def refuse_secrets(text: str, where: str) -> ScanResult:
    """Scan `text`; raise `SecretRefused` (naming `where` and the rules, never the secret) if it
    holds a secret; otherwise return the result, whose injections the caller handles."""
    result = scan(text)
    secrets = result.secrets
    if secrets:
        raise SecretRefused(where, secrets)
    return result
