"""The scanner's data-driven secret rules (Nosey Parker's, gitleaks' and detect-secrets' rule
sets, converted by scripts/build_secret_rules.py into secret_rules/rules.json).

The rule sets' own examples are not shipped (they are real-looking strings). Each rule's true
positive is made here at run time: a random string its own pattern matches, drawn from the
parsed pattern, so no string in this file looks like a credential.
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
import string

import pytest

try:
    import re._parser as sre_parse
    from re import _constants as C
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_constants as C
    import sre_parse

from soulgraph.memory.scanner import RULES, scan
from soulgraph.memory.scanner import secrets as S

DATA = json.load(open(S._RULES_FILE, encoding="utf-8"))
SPECS = {r["id"]: r for r in DATA["rules"]}
PRINTABLE = string.ascii_letters + string.digits + "_-.+/=:@"


def _chars(items, rng: random.Random) -> str:
    """One character of a parsed character class."""
    negate = any(op is C.NEGATE for op, _ in items)
    allowed: list[str] = []
    for op, av in items:
        if op is C.LITERAL:
            allowed.append(chr(av))
        elif op is C.RANGE:
            lo, hi = av
            allowed.extend(chr(c) for c in range(lo, min(hi, lo + 200) + 1))
        elif op is C.CATEGORY:
            allowed.extend({C.CATEGORY_DIGIT: string.digits, C.CATEGORY_WORD: string.ascii_letters
                            + string.digits + "_", C.CATEGORY_SPACE: " ",
                            C.CATEGORY_NOT_SPACE: PRINTABLE, C.CATEGORY_NOT_DIGIT: "abcXYZ",
                            C.CATEGORY_NOT_WORD: " -."}.get(av, "a"))
    if negate:
        pool = [c for c in string.ascii_letters + string.digits if c not in allowed]
        return rng.choice(pool or ["~"])
    return rng.choice(allowed or ["a"])


def _draw(seq, rng: random.Random, groups: dict[int, str]) -> str:
    out = []
    for op, av in seq:
        if op is C.LITERAL:
            out.append(chr(av))
        elif op is C.NOT_LITERAL:
            out.append(rng.choice([c for c in "aZ9_" if ord(c) != av]))
        elif op is C.ANY:
            out.append(" " if rng.random() < 0.5 else rng.choice(string.ascii_letters + ":=\"'"))
        elif op is C.IN:
            out.append(_chars(av, rng))
        elif op is C.CATEGORY:
            out.append(_chars([(op, av)], rng))
        elif op is C.BRANCH:
            out.append(_draw(rng.choice(av[1]), rng, groups))
        elif op is C.SUBPATTERN:
            s = _draw(av[3], rng, groups)
            if av[0]:
                groups[av[0]] = s
            out.append(s)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
            lo, hi = av[0], av[1]
            hi = lo + 12 if hi is C.MAXREPEAT else hi
            # the fewest repeats half the time: optional parts (comments, separators) absent
            n = lo if rng.random() < 0.5 else rng.randint(lo, max(lo, min(hi, lo + 12)))
            out.extend(_draw(av[2], rng, groups) for _ in range(n))
        elif op is C.GROUPREF:
            out.append(groups.get(av, ""))
        # AT, ASSERT, ASSERT_NOT: zero width, left to the retries
    return "".join(out)


def _jwt(rng: random.Random) -> str:
    def part(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    sig = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(43))
    return part({"alg": "HS256", "typ": "JWT"}) + "." + part({"sub": str(rng.random())}) + "." + sig


def example(rule_id: str, seed: int) -> str:
    spec = SPECS[rule_id]
    if rule_id == "gitleaks:jwt":  # its value must also decode, as the jwt rule checks
        return f"note for later:\n{_jwt(random.Random(seed))}\nend of note"
    flags = spec["flags"]
    tree = sre_parse.parse(("(?%s)" % flags if flags else "") + spec["pattern"])
    rng = random.Random(f"{rule_id}:{seed}")
    body = _draw(list(tree), rng, {})
    keywords = spec["keywords"]
    lead = ""
    if keywords and not any((k in body) if spec["keywords_case"] else (k in body.lower())
                            for k in keywords):
        lead = keywords[0] + " "  # gitleaks' keywords need not be in the match itself
    return f"note for later:\n{lead}{body}\nend of note"


def fires(rule_id: str, text: str) -> tuple[int, int] | None:
    rule = RULES[rule_id]
    low = text.lower()
    for start, end in rule.find(text, low if len(low) == len(text) else None):
        if not S._placeholder_value(text[start:end]):
            return start, end
    return None


DATA_IDS = [r.id for r in S.DATA_RULES]


@pytest.mark.parametrize("rule_id", DATA_IDS)
def test_every_data_rule_finds_its_own_example(rule_id):
    for seed in range(60):
        text = example(rule_id, seed)
        span = fires(rule_id, text)
        if span:
            start, end = span
            assert 0 <= start < end <= len(text)
            return
    pytest.fail(f"{rule_id}: no drawn example matched ({text!r})")


def test_data_rules_are_all_in_the_rules_table_with_their_source():
    assert len(S.DATA_RULES) == len(DATA["rules"]) > 300
    sources = {r["source"] for r in DATA["rules"]}
    assert sources == {"noseyparker", "gitleaks", "detect-secrets"}
    for r in S.DATA_RULES:
        assert RULES[r.id] is r and r.kind == "secret"
        assert r.id.split(":", 1)[0] in sources
        assert r.source and r.description and "\n" not in r.description


def test_a_data_rule_finding_names_its_rule_and_never_the_secret():
    rule_id = "noseyparker:np.tavily.1"
    rng = random.Random(7)
    secret = "tvly-" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(32))
    result = scan(f"search key {secret} for the agent")
    hits = [f for f in result.secrets if f.rule == rule_id]
    assert hits and f"search key {secret} for the agent"[hits[0].start:hits[0].end] == secret
    assert secret not in hits[0].description and secret[5:13] not in hits[0].description


def test_the_shipped_rules_hold_no_example_and_record_their_sources():
    assert "examples" not in json.dumps(DATA["rules"][:1])
    for rule in DATA["rules"]:
        assert set(rule) >= {"id", "pattern", "keywords", "groups"}
        assert "examples" not in rule and "negative_examples" not in rule
    assert {"noseyparker", "gitleaks", "detect-secrets"} <= set(DATA["sources"])
    folder = os.path.dirname(S._RULES_FILE)
    assert os.path.exists(os.path.join(folder, "NOTICE"))


def test_documented_example_keys_pass():
    # AWS's documentation key id, a Stripe test key marked as an example, runs of x
    aws_doc = "AKIA" + "IOSFODNN7" + "EXAMPLE"
    stripe_doc = "sk_" + "test_" + "example" + "x" * 20
    for text in (f"AWS documents {aws_doc} as its sample key id",
                 f"STRIPE_KEY={stripe_doc}", "token: " + "ghp_" + "x" * 36,
                 "api_key = " + "AIza" + "a" * 35):
        assert not scan(text).secrets, text


@pytest.mark.parametrize("text", [
    "my bank password is hunter2!",
    "the wifi password was Tr0ub4dor&3",
    "Password: correct-horse-9-battery",
])
def test_passwords_in_prose_are_refused(text):
    assert scan(text).secrets, text


@pytest.mark.parametrize("text", [
    "the password is strong",
    "my password was reset yesterday",
    "password: see the vault",
    "the password is long enough now",
    "what is my password?",
])
def test_prose_about_passwords_passes(text):
    assert not scan(text).secrets, text


def test_known_values_are_digests_only():
    for digest in DATA["known_values_sha256"]:
        assert re.fullmatch(r"[0-9a-f]{64}", digest)


def _required_literals(parsed) -> set[str]:
    """The characters every match of a parsed pattern holds (its top-level literals)."""
    out: set[str] = set()
    for op, av in parsed:
        if op is C.LITERAL:
            out.add(chr(av))
        elif op is C.SUBPATTERN:
            out |= _required_literals(av[3])
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[0] >= 1:
            out |= _required_literals(av[2])
    return out


def test_the_character_gates_of_keywordless_mixed_rules_are_in_their_patterns():
    """Every mixed rule without keywords that needs a punctuation character is gated by it, and
    the character gate is one its pattern needs (a gate never hides a match)."""
    needing = {}
    for rule_id, spec in SPECS.items():
        if spec["mixed"] and not spec["keywords"]:
            punctuation = {c for c in _required_literals(sre_parse.parse(spec["pattern"])) if not c.isalnum()}
            if punctuation:
                needing[rule_id] = punctuation
    assert set(S._MIXED_NEEDS_CHAR) == set(needing)
    for rule_id, char in S._MIXED_NEEDS_CHAR.items():
        assert char in needing[rule_id]


def test_the_digit_run_gate_is_in_its_rules_pattern():
    spec = SPECS["detect-secrets:TelegramBotTokenDetector.1"]
    assert spec["pattern"].startswith("\\d{8,")
    assert S._DIGIT_RUN_BITS and S._digit_run("id 12345678:") and not S._digit_run("id 1234567:")
    assert S._digit_run("id \u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668:")  # \d is any script's digits
