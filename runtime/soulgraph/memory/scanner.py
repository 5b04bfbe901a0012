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

Rules and where their facts come from. The patterns are our own code; the facts (prefixes,
lengths, character classes, placeholder lists) are the ones these maintained sets publish.
"detect-secrets" is Yelp's detect-secrets (its `detect_secrets/plugins/*`), "gitleaks" is
gitleaks' default rule set (`config/gitleaks.toml`, rule id given).

| rule id | kind | source of the facts |
|---|---|---|
| `private-key-block` | secret | detect-secrets PrivateKeyDetector (`BEGIN … PRIVATE KEY` header kinds: DSA, EC, OPENSSH, PGP, RSA, SSH2 ENCRYPTED, plain; `PuTTY-User-Key-File`); gitleaks `private-key` |
| `aws-access-key-id` | secret | gitleaks `aws-access-token` (A3T?/AKIA/ASIA/ABIA/ACCA + 16, `…EXAMPLE` allowed); detect-secrets AWSKeyDetector |
| `aws-secret-access-key` | secret | detect-secrets AWSKeyDetector (40 chars of `[A-Za-z0-9/+]` after an `aws…key/secret` name) |
| `github-token` | secret | detect-secrets GitHubTokenDetector (`ghp_ gho_ ghu_ ghs_ ghr_` + 36); GitHub's 2021-04-05 token-format post |
| `github-fine-grained-pat` | secret | gitleaks `github-fine-grained-pat` (`github_pat_` + 82 word chars) |
| `gitlab-token` | secret | detect-secrets GitLabTokenDetector (`glpat- gloas- gldt- glrt- glcbt- glptt- glft- glimt- glagent- glsoat-` + 20–50); gitleaks `gitlab-pat` |
| `slack-token` | secret | detect-secrets SlackDetector (`xox[abposr]-` digit groups); gitleaks `slack-app-token` (`xapp-`) |
| `slack-webhook-url` | secret | detect-secrets SlackDetector; gitleaks `slack-webhook-url` (`hooks.slack.com/` then `services/`, `workflows/` or `triggers/`) |
| `stripe-key` | secret | detect-secrets StripeDetector (`sk_live_ rk_live_`); gitleaks `stripe-access-token` (`test`, `prod` too) |
| `anthropic-api-key` | secret | gitleaks `anthropic-api-key`, `anthropic-admin-api-key` (`sk-ant-api03-`, `sk-ant-admin01-`) |
| `openai-api-key` | secret | detect-secrets OpenAIDetector (`T3BlbkFJ` marker); gitleaks `openai-api-key` (`sk-proj- sk-svcacct- sk-admin-`) |
| `google-api-key` | secret | gitleaks `gcp-api-key` (`AIza` + 35 of `[\\w-]`) |
| `huggingface-token` | secret | gitleaks `huggingface-access-token` (`hf_` + 34), `huggingface-organization-api-token` (`api_org_` + 34) |
| `npm-token` | secret | gitleaks `npm-access-token` (`npm_` + 36); detect-secrets NpmDetector |
| `pypi-token` | secret | detect-secrets PypiTokenDetector (`pypi-AgEIcHlwaS5vcmc`, `pypi-AgENdGVzdC5weXBpLm9yZw` + 70 or more) |
| `sendgrid-api-key` | secret | detect-secrets SendGridDetector (`SG.` 22 `.` 43) |
| `twilio-api-key` | secret | detect-secrets TwilioKeyDetector, gitleaks `twilio-api-key` (`SK` + 32 hex) |
| `jwt` | secret | detect-secrets JwtTokenDetector (`eyJ…` segments that decode to JSON); gitleaks `jwt` |
| `url-credentials` | secret | detect-secrets BasicAuthDetector (`scheme://user:password@host`) |
| `authorization-header` | secret | gitleaks `curl-auth-header` (`Authorization: Bearer …` / `Basic …`) |
| `credential-assignment` | secret | detect-secrets KeywordDetector (secret-sounding names, its FALSE_POSITIVES values); gitleaks `generic-api-key` and its global allowlist (placeholders, `$VAR`, `${…}`, `{{…}}`, system paths) |
| `ignore-previous-instructions` | injection | our phrase list; OWASP Top 10 for LLM Applications, LLM01 Prompt Injection |
| `disregard-instructions` | injection | our phrase list; OWASP LLM01 |
| `role-override` | injection | our phrase list ("you are now …", jailbreak role-play); OWASP LLM01 |
| `fake-role-header` | injection | chat-template control tokens (ChatML's `im_start` / `im_end`, Llama's `<<SYS>>`, `[INST]`, `start_header_id`); line-start `system:` / `### System` headers |
| `invisible-unicode` | injection | Unicode general category Cf: zero-width U+200B–U+200F, bidi embeddings/overrides U+202A–U+202E ("Trojan Source", CVE-2021-42574), U+2060–U+2064, bidi isolates U+2066–U+2069, U+FEFF, tag characters U+E0000–U+E007F ("ASCII smuggling") |
| `exfiltration-url` | injection | markdown image / link whose URL is templated with conversation data (the markdown-image exfiltration class; OWASP LLM01, LLM02) |
| `exfiltration-instruction` | injection | our phrase list: send / post / append <conversation, secrets, …> to <URL, endpoint, webhook> |

Judgment calls (tests/test_scanner.py holds an example of each):

- Ordinary notes pass: "the password policy requires 12 characters", "rotate the AWS keys
  monthly", "token bucket rate limiter", "ignore the previous build output". A
  `credential-assignment` needs a name that *ends* in a secret word (`db_password`,
  `GITHUB_TOKEN`, `_authToken`; not `password_policy`, `max_tokens`), a separator, and a value
  that looks like a secret: 6+ characters, not a placeholder (`<your password>`, `***`,
  `${VAR}`, `{{ x }}`, `%VAR%`, `changeme`, `REDACTED`, …), not a reference (a path, a dotted
  name such as `settings.DB_PASS`, an identifier such as `confirm_password`, a call or an
  index), not a number with a unit, date or version, and not a word or two in one case
  ("token: optional", "password: Required", `"sk-test"`) unless 16+ characters long (then it
  is taken for a passphrase, such as correct-horse-battery-staple).
- "ignore previous instructions / prompts / guidelines" fires with up to two words between
  ("ignore the previous setup instructions" does too: it is the attack's own wording), but
  nouns that ordinary notes use ("messages", "commands", "rules", "context") fire only right
  after "previous": "ignore previous error messages in the log" passes.
- "act as a reviewer for PR 42" passes: "act as" is ordinary delegation language in notes.
  Only the jailbreak forms fire (`act as an unrestricted/unfiltered … AI`, `act as DAN`,
  `act as if you have no restrictions`), and "you are now …" fires only when it gives the
  reader a new model identity or mode ("you are now an unrestricted AI", "… in developer
  mode", "… DAN"), not a human role ("you are now the on-call owner").
- A line-start `system:` / `### System` header is an injection only when the next ~240
  characters carry an instruction cue ("you must", "ignore", "from now on", "respond", …):
  "System: Debian 12, 8 GB RAM" in a host note passes. Chat-template control tokens always
  fire, even in a note about prompt formats: the reader of the memory is a model.
- A private-key header alone ("the file starts with -----BEGIN OPENSSH PRIVATE KEY-----")
  passes; a header followed by key material (a base64 line of 32+ characters) fires, with or
  without its END line (a truncated key is still key material).
- `AKIA…EXAMPLE` (AWS's documentation key) passes, as in gitleaks. Stripe test keys fire
  (they authenticate, to test-mode data). A Twilio account SID (`AC…`) is an identifier, not
  a credential: only API keys (`SK…`) fire; an auth token is caught as an assignment.
- Zero-width joiner / non-joiner (U+200D, U+200C) between two non-ASCII letters or emoji is
  how emoji sequences and Persian/Indic scripts are written, so it passes; a lone U+FEFF at
  offset 0 is a byte-order mark from an imported file and passes. Everything else in the
  listed ranges fires, one finding per run of consecutive characters.
- A markdown image whose URL (path or query) carries any template placeholder fires (images
  load by themselves); a link or a bare URL fires only when a query value is a placeholder
  naming conversation data (`{conversation}`, `{{chat_history}}`, `$SECRETS`,
  `<SUMMARY_OF_CHAT>`), so "GET https://api.example/search?q={query}" in an API note passes.
- Where a provider rule and a generic rule overlap (`token=ghp_…`), only the provider rule is
  reported; likewise overlapping injection rules report once.
- Not covered: passwords in prose ("my password is hunter2"), quoted passphrases with spaces,
  homoglyph or full-width spellings of the injection phrases, and injections in other
  languages. The scanner is one layer, not the whole defence.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
import re
import sys
import unicodedata
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

__all__ = ["Finding", "ScanResult", "Rule", "RULES", "SecretRefused", "scan", "refuse_secrets"]

SECRET = "secret"
INJECTION = "injection"


@dataclass(frozen=True)
class Finding:
    """One match: which rule, a one-line description (never the matched text), and the span
    `text[start:end]` it covers (for a secret, the secret itself; for an assignment or a URL,
    the value, not the name)."""

    kind: str  # "secret" or "injection"
    rule: str
    description: str
    start: int
    end: int


@dataclass(frozen=True)
class ScanResult:
    """All findings of one scan, ordered by position."""

    findings: tuple[Finding, ...] = ()

    @property
    def secrets(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.kind == SECRET)

    @property
    def injections(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.kind == INJECTION)

    @property
    def clean(self) -> bool:
        return not self.findings

    @property
    def rules(self) -> tuple[str, ...]:
        """The distinct rule ids that fired, sorted."""
        return tuple(sorted({f.rule for f in self.findings}))


class SecretRefused(ValueError):
    """A write was refused because its text holds a secret. The message names the rules and
    where; it never includes the secret. `findings` has the spans for the caller."""

    def __init__(self, where: str, findings: tuple[Finding, ...]):
        self.where = where
        self.findings = findings
        self.rules = tuple(sorted({f.rule for f in findings}))
        n = len(findings)
        super().__init__(
            f"{where}: refused, the text holds {n} secret{'s' if n != 1 else ''} "
            f"({', '.join(self.rules)}); store where the secret lives (a vault path, an "
            "environment variable name), never the secret itself")


Finder = Callable[[str, "str | None"], Iterable[tuple[int, int]]]


@dataclass(frozen=True)
class Rule:
    """One rule: its id, kind, the description every finding carries, the source of its
    facts, and (internal) the literal keywords that gate it and its finder. A finder gets the
    text and `low`, the text lower-cased (None when lower-casing would change its length)."""

    id: str
    kind: str
    description: str
    source: str
    # Lower-case literals: the rule runs only if one is in the text. A few cheap `in` checks
    # beat running the rule (each call costs more than the checks), and beat one combined
    # regex over all prefixes (alternations of common first letters scan slowly).
    keywords: tuple[str, ...]
    find: Finder


# -- helpers -------------------------------------------------------------------------------------
#
# Speed: `re` skips quickly to where a pattern's first character can match, but only when the
# pattern *starts* with a literal (or a small set of them) and is case-sensitive. So every
# pattern starts with its literal, left boundaries are checked in Python after the match, and
# case-insensitive patterns are written in lower case and run on the lower-cased text (spans
# are the same; values are read back from the original text).

_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _free_left(text: str, start: int, bad: frozenset[str]) -> bool:
    """No character of `bad` right before `start`."""
    return start == 0 or text[start - 1] not in bad


def _word_start(text: str, start: int) -> bool:
    """`start` is at a word boundary (what a leading \\b would say, for ASCII words)."""
    return start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_")


class _Lower:
    """A pattern written in lower case: run on the lower-cased text when there is one (fast),
    else with IGNORECASE on the text itself."""

    def __init__(self, pattern: str, flags: int = 0):
        self.plain = re.compile(pattern, flags)
        self.folded = re.compile(pattern, flags | re.IGNORECASE)

    def finditer(self, text: str, low: str | None, pos: int = 0, endpos: int = sys.maxsize):
        if low is not None:
            return self.plain.finditer(low, pos, endpos)
        return self.folded.finditer(text, pos, endpos)

    def search(self, text: str, low: str | None, pos: int = 0, endpos: int = sys.maxsize):
        if low is not None:
            return self.plain.search(low, pos, endpos)
        return self.folded.search(text, pos, endpos)

    def match(self, text: str, low: str | None, pos: int = 0, endpos: int = sys.maxsize):
        if low is not None:
            return self.plain.match(low, pos, endpos)
        return self.folded.match(text, pos, endpos)


class _Words:
    """Where any of a few lower-case literal words occurs: `str.find` per word on the
    lower-cased text (C-speed), a regex of them with IGNORECASE otherwise."""

    def __init__(self, *words: str):
        self.words = words
        self.folded = re.compile("|".join(map(re.escape, words)), re.IGNORECASE)

    def positions(self, text: str, low: str | None) -> list[int]:
        if low is None:
            return [m.start() for m in self.folded.finditer(text)]
        found: list[int] = []
        for word in self.words:
            at = low.find(word)
            while at >= 0:
                found.append(at)
                at = low.find(word, at + 1)
        if len(self.words) > 1:
            found.sort()
        return found


def _classes(value: str) -> int:
    """How many of lower, upper, digit, other a value uses."""
    lower = upper = digit = other = 0
    for c in value:
        if "a" <= c <= "z":
            lower = 1
        elif "A" <= c <= "Z":
            upper = 1
        elif "0" <= c <= "9":
            digit = 1
        else:
            other = 1
    return lower + upper + digit + other


# Values that stand for a secret rather than being one (detect-secrets' FALSE_POSITIVES and
# gitleaks' allowlist say the same): placeholders, references, paths, templates.
_PLACEHOLDER_WORDS = ("your", "example", "placeholder", "redacted", "changeme", "change_me",
                      "change-me", "dummy", "sample", "replace", "xxx", "***", "...", "…",
                      "<", ">", "todo", "insert", "notreal", "not_real", "not-real")
_REFERENCE_START = ("<", "{", "$", "%", "[", "!vault", "#", "/", "~/", "./", "../", "@",
                    "(", "env:", "vault:", "op://", "file:", "http://", "https://")
_FILLER = frozenset("*xX.-_#•·")
_NUMBERISH = re.compile(r"\d+(?:[.,]\d+)*[A-Za-z%]{0,3}|v?\d+(?:[.:/-]\d+)+[A-Za-z]{0,2}")
_DOTTED_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
_IDENTIFIER = re.compile(r"[a-z]+(?:_[a-z]+)+|[A-Z]+(?:_[A-Z]+)+|[a-z]+(?:[A-Z][a-z]+)+"
                         r"|[A-Z][a-z]+(?:[A-Z][a-z]+)+")  # confirm_password, DB_PASS, newToken
_TRAILING = ".,;:)]}>!?\\"


def _is_placeholder(value: str) -> bool:
    low = value.lower()
    if low.startswith(_REFERENCE_START) or set(value) <= _FILLER:
        return True
    return any(w in low for w in _PLACEHOLDER_WORDS)


def _looks_secret(value: str) -> bool:
    """Whether an assigned value looks like a real credential (see the module docstring)."""
    if len(value) < 6 or _is_placeholder(value):
        return False
    if "(" in value or "[" in value or _NUMBERISH.fullmatch(value) \
            or _DOTTED_NAME.fullmatch(value) or _IDENTIFIER.fullmatch(value):
        return False  # code: a call, an index, a number, a name
    words = value.replace("-", "").replace("_", "").replace(".", "")
    if words.isalpha() and (words.islower() or words.isupper() or value.istitle()):
        return len(value) >= 16  # a word or two ("Required", "sk-test"), not a passphrase
    return _classes(value) >= 2


def _token(pattern: str, left: frozenset[str] = _ALNUM,
           check: Callable[[re.Match[str]], bool] | None = None) -> Finder:
    """A case-sensitive, literal-first token pattern: every match with no `left` character
    before it that passes `check`."""
    compiled = re.compile(pattern)

    def find(text: str, low: str | None) -> Iterator[tuple[int, int]]:
        for m in compiled.finditer(text):
            if _free_left(text, m.start(), left) and (check is None or check(m)):
                yield m.span()

    return find


def _valued(pattern: _Lower, accept: Callable[[str], bool],
            left: Callable[[str, int], bool] | None = None) -> Finder:
    """A finder for `name <sep> value` patterns (lower case): the span of group `v`, read
    from the original text with trailing punctuation trimmed, when `accept(value)`."""

    def find(text: str, low: str | None) -> Iterator[tuple[int, int]]:
        for m in pattern.finditer(text, low):
            if left is not None and not left(text, m.start()):
                continue
            start = m.start("v")
            value = text[start:m.end("v")].rstrip(_TRAILING)
            if value and accept(value):
                yield start, start + len(value)

    return find


# -- secrets -------------------------------------------------------------------------------------

_PEM_HEADER = re.compile(r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_FIELD = re.compile(r"[A-Za-z-]{1,40}:[^\n]{0,200}")
_B64_LINE = re.compile(r"[A-Za-z0-9+/=]{1,100}")
_MATERIAL = re.compile(r"[A-Za-z0-9+/]{32,}")
_PUTTY_HEADER = re.compile(r"PuTTY-User-Key-File-\d{1,2}:")
_KEY_REACH = 20000  # how far past a header a key's body or END line may be


def _key_body_end(text: str, pos: int, limit: int) -> int:
    """Where the key material after a header without END line stops, or -1 if there is
    none (a header quoted alone). Lines of base64, `Name: value` fields and blank lines."""
    end, material = -1, False
    while pos < limit:
        nl = text.find("\n", pos, limit)
        line_end = limit if nl < 0 else nl
        line = text[pos:line_end].strip()
        if not line and material:
            break  # a blank line after the key material ends it
        if line:
            if _B64_LINE.fullmatch(line):
                material = material or bool(_MATERIAL.search(line))
                end = line_end
            elif not _PEM_FIELD.fullmatch(line):
                break
        pos = line_end + 1
    return end if material else -1


def _find_private_keys(text: str, low: str | None) -> Iterator[tuple[int, int]]:
    headers = list(_PEM_HEADER.finditer(text))
    end_m: re.Match[str] | None = None
    no_end_after = len(text) + 1  # no END line starts at or after this offset
    for i, m in enumerate(headers):
        # A block reaches at most to the next header: each stretch of text is read once.
        limit = min(headers[i + 1].start() if i + 1 < len(headers) else len(text),
                    m.end() + _KEY_REACH)
        if (end_m is None or end_m.start() < m.end()) and m.end() < no_end_after:
            end_m = _PEM_END.search(text, m.end())
            if end_m is None:
                no_end_after = m.end()
        if end_m is not None and m.end() <= end_m.start() and end_m.end() <= limit:
            if _MATERIAL.search(text, m.end(), end_m.start()):
                yield m.start(), end_m.end()
        else:  # truncated: up to its last line of key material
            end = _key_body_end(text, m.end(), limit)
            if end > 0:
                yield m.start(), end
    for m in _PUTTY_HEADER.finditer(text):
        private = text.find("Private-Lines:", m.end(), m.end() + _KEY_REACH)
        if private < 0:
            continue
        mac = text.find("Private-MAC:", private, private + _KEY_REACH)
        nl = text.find("\n", mac) if mac >= 0 else -1
        yield m.start(), (nl if nl >= 0 else len(text))


def _not_example(m: re.Match[str]) -> bool:
    return not m.group().endswith("EXAMPLE")


def _jwt_valid(m: re.Match[str]) -> bool:
    """Header and payload decode (base64url) to JSON objects, as detect-secrets checks."""
    for part in m.group().split(".")[:2]:
        try:
            raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
            if not isinstance(json.loads(raw.decode("utf-8")), dict):
                return False
        except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):
            return False
    return True


_URL_PW_PLACEHOLDERS = frozenset({"password", "pass", "passwd", "pwd", "pw", "secret", "token",
                                  "x", "xxx", "user", "username"})


def _url_password(value: str) -> bool:
    return value.lower() not in _URL_PW_PLACEHOLDERS and not _is_placeholder(value)


_URL_USERINFO = re.compile(r"://[^\s:/?#@\"'<>]{0,100}:(?P<v>[^\s/?#@\"'<>]{1,200})@"
                           r"(?=[A-Za-z0-9\[])")
_SCHEME_TAIL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")


def _has_scheme(text: str, colon: int) -> bool:
    """A URL scheme (a letter, then up to 15 of letters, digits, + . -) ends at `colon`."""
    i = colon
    while i > 0 and colon - i < 16 and text[i - 1] in _SCHEME_TAIL:
        i -= 1
    return i < colon and text[i] in _LETTERS and (i == 0 or text[i - 1] not in _SCHEME_TAIL)


def _find_url_credentials(text: str, low: str | None) -> Iterator[tuple[int, int]]:
    for m in _URL_USERINFO.finditer(text):
        if _has_scheme(text, m.start()) and _url_password(m.group("v")):
            yield m.span("v")


_BEARER = _Lower(r"bearer[ \t]{1,5}(?P<v>[a-z0-9._~+/-]{20,4000}=*)")
_BASIC = _Lower(r"authorization[\"']?[ \t]{0,3}[:=][ \t]{0,5}[\"']?basic[ \t]{1,5}"
                r"(?P<v>[a-z0-9+/]{8,1000}={0,2})")


def _find_auth_headers(text: str, low: str | None) -> Iterator[tuple[int, int]]:
    for m in _BEARER.finditer(text, low):
        value = text[m.start("v"):m.end("v")]
        if _free_left(text, m.start(), _ALNUM) and not _is_placeholder(value) \
                and _classes(value) >= 2:
            yield m.span("v")
    for m in _BASIC.finditer(text, low):
        value = text[m.start("v"):m.end("v")]
        try:  # basic credentials are base64 of "user:password"
            decoded = base64.b64decode(value + "=" * (-len(value) % 4)).decode("utf-8")
        except (binascii.Error, ValueError, UnicodeDecodeError):
            continue
        if ":" in decoded and _url_password(decoded.split(":", 1)[1]):
            yield m.span("v")


# A name that *ends* in a secret word: nothing word-like after it (not `password_policy`,
# `max_tokens`), and before it a non-letter or a camel hump (`db_password`, `authToken`; not
# `bypass`). `re` skips quickly to a core word (pass, key, token, …); the pattern is matched
# there, and a bare `key` must have one of the prefixes before it (`api_key`, `dbKey`).
_ASSIGNMENT_CORE = _Words("pass", "pwd", "secret", "key", "token", "credential", "contrase")
_ASSIGNMENT = _Lower(
    r"(?:passw(?:or)?d|pass|pwd|passphrase|contrase(?:ñ|n)a|secret(?:[_-]?(?:access[_-]?)?key)?"
    r"|credentials?|key|token)(?![a-z0-9_])"
    r"(?P<c>[\]\"'*`)]{0,3})[ \t]{0,3}(?::=|=>|={1,3}|!==?|:)(?![=:/])[ \t]{0,3}@?"
    r"(?P<q>[\"'`]?)(?P<v>[^\s\"'`]{1,200})")
_KEY_PREFIX = _Lower(r"(?:api|app|auth|access|client|private|priv|service|account|db|database"
                     r"|master|signing|encryption|license)[_-]?\Z")
_KEY_PREFIX_REACH = 11  # len("encryption_")


def _find_assignments(text: str, low: str | None) -> Iterator[tuple[int, int]]:
    done = -1
    for at in _ASSIGNMENT_CORE.positions(text, low):
        if at < done:
            continue
        m = _ASSIGNMENT.match(text, low, at)
        if m is None:
            continue
        done = m.end()
        name = at
        if text[at:at + 3].lower() == "key":
            prefix = _KEY_PREFIX.search(text, low, max(0, at - _KEY_PREFIX_REACH), at)
            if prefix is None:
                continue
            name = prefix.start()
        if not _name_start(text, name):
            continue
        quote = m.group("q")
        if quote and name and text[name - 1] == quote and quote not in m.group("c"):
            continue  # `password=`-style: that quote closes the name's own span
        start = m.start("v")
        value = _ESCAPE.split(text[start:m.end("v")], 1)[0].rstrip(_TRAILING)
        if value and _looks_secret(value):
            yield start, start + len(value)


_ESCAPE = re.compile(r"\\[nrt]")  # a value quoted in source code ends at an escape: "…:\n"


def _name_start(text: str, start: int) -> bool:
    if start == 0 or text[start - 1] not in _LETTERS:
        return True
    before, first = text[start - 1], text[start]
    return ("a" <= before <= "z" or before.isdigit()) and "A" <= first <= "Z"


_AWS_SECRET = _Lower(
    r"aws[a-z0-9_.-]{0,20}?(?:secret|key)[a-z0-9_.-]{0,20}[\]\"']{0,2}[ \t]{0,3}"
    r"(?::=|=>|=|:)[ \t]{0,3}[\"']?(?P<v>[a-z0-9/+]{40})(?![a-z0-9/+=])")

_WORD_OR_DASH = _WORD | {"-"}

_SECRET_RULES: list[Rule] = [
    Rule("private-key-block", SECRET, "a private key block (PEM, OpenSSH, PGP or PuTTY)",
         "detect-secrets PrivateKeyDetector; gitleaks private-key",
         ("private key", "putty-user-key-file"), _find_private_keys),
    Rule("aws-access-key-id", SECRET, "an AWS access key id",
         "gitleaks aws-access-token; detect-secrets AWSKeyDetector",
         ("akia", "asia", "abia", "acca", "a3t"),
         _token(r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])",
                check=_not_example)),
    Rule("aws-secret-access-key", SECRET, "an AWS secret access key assigned to an aws key name",
         "detect-secrets AWSKeyDetector", ("aws",),
         _valued(_AWS_SECRET, lambda v: _classes(v) >= 2 and not _is_placeholder(v),
                 lambda text, start: _free_left(text, start, _LETTERS))),
    Rule("github-token", SECRET, "a GitHub token (personal, OAuth, app or refresh)",
         "detect-secrets GitHubTokenDetector; GitHub token formats (2021-04-05)",
         ("_",),
         _token(r"gh[pousr]_[A-Za-z0-9]{36,251}(?![A-Za-z0-9_])", _WORD)),
    Rule("github-fine-grained-pat", SECRET, "a GitHub fine-grained personal access token",
         "gitleaks github-fine-grained-pat", ("_",),
         _token(r"github_pat_[A-Za-z0-9_]{50,255}(?![A-Za-z0-9_])", _WORD)),
    Rule("gitlab-token", SECRET, "a GitLab token",
         "detect-secrets GitLabTokenDetector; gitleaks gitlab-pat",
         ("gl",),
         _token(r"gl(?:pat|oas|dt|rt|cbt|ptt|ft|imt|agent|soat)-[A-Za-z0-9_-]{20,50}"
                r"(?![A-Za-z0-9_-])", _WORD_OR_DASH)),
    Rule("slack-token", SECRET, "a Slack token",
         "detect-secrets SlackDetector; gitleaks slack-app-token", ("xox", "xapp"),
         _token(r"xox[abposr]-(?:[0-9]{1,20}-){1,4}[A-Za-z0-9-]{6,200}"
                r"|xapp-[0-9]-[A-Z0-9]{6,20}-[0-9]{6,20}-[A-Za-z0-9]{20,100}")),
    Rule("slack-webhook-url", SECRET, "a Slack incoming-webhook URL",
         "detect-secrets SlackDetector; gitleaks slack-webhook-url", ("hooks.slack",),
         _token(r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/"
                r"[A-Za-z0-9+/_-]{20,200}", frozenset())),
    Rule("stripe-key", SECRET, "a Stripe secret or restricted key",
         "detect-secrets StripeDetector; gitleaks stripe-access-token",
         ("_",),
         _token(r"[sr]k_(?:live|test|prod)_[A-Za-z0-9]{20,247}(?![A-Za-z0-9])", _WORD)),
    Rule("anthropic-api-key", SECRET, "an Anthropic API key",
         "gitleaks anthropic-api-key, anthropic-admin-api-key", ("sk-",),
         _token(r"sk-ant-[A-Za-z0-9_-]{32,300}", _WORD_OR_DASH)),
    Rule("openai-api-key", SECRET, "an OpenAI API key",
         "detect-secrets OpenAIDetector; gitleaks openai-api-key", ("sk-",),
         _token(r"sk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,300}"
                r"|[A-Za-z0-9]{32,200}(?![A-Za-z0-9_-]))", _WORD_OR_DASH)),
    Rule("google-api-key", SECRET, "a Google API key", "gitleaks gcp-api-key", ("aiza",),
         _token(r"AIza[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])", _WORD_OR_DASH)),
    Rule("huggingface-token", SECRET, "a Hugging Face access token",
         "gitleaks huggingface-access-token, huggingface-organization-api-token",
         ("_",),
         _token(r"(?:hf|api_org)_[A-Za-z0-9]{34}(?![A-Za-z0-9_])", _WORD)),
    Rule("npm-token", SECRET, "an npm access token",
         "gitleaks npm-access-token; detect-secrets NpmDetector", ("_",),
         _token(r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9_])", _WORD)),
    Rule("pypi-token", SECRET, "a PyPI upload token", "detect-secrets PypiTokenDetector", ("pypi-",),
         _token(r"pypi-(?:AgEIcHlwaS5vcmc|AgENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{70,2000}")),
    Rule("sendgrid-api-key", SECRET, "a SendGrid API key", "detect-secrets SendGridDetector", ("sg.",),
         _token(r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])", _WORD_OR_DASH)),
    Rule("twilio-api-key", SECRET, "a Twilio API key",
         "detect-secrets TwilioKeyDetector; gitleaks twilio-api-key", ("sk",),
         _token(r"SK[0-9a-fA-F]{32}(?![A-Za-z0-9])")),
    Rule("jwt", SECRET, "a JSON Web Token",
         "detect-secrets JwtTokenDetector; gitleaks jwt", ("eyj",),
         # the lookbehind after the literal stops a run of "eyJeyJ…" rescanning itself
         _token(r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,2000}\.eyJ[A-Za-z0-9_-]{8,8000}"
                r"\.[A-Za-z0-9_-]{0,2000}", _WORD_OR_DASH, _jwt_valid)),
    Rule("url-credentials", SECRET, "a URL with a password in it (scheme://user:password@host)",
         "detect-secrets BasicAuthDetector", ("://",), _find_url_credentials),
    Rule("authorization-header", SECRET,
         "a bearer or basic credential from an Authorization header",
         "gitleaks curl-auth-header", ("bearer", "basic"), _find_auth_headers),
    Rule("credential-assignment", SECRET,
         "a credential assigned to a password, secret, token or api-key name",
         "detect-secrets KeywordDetector; gitleaks generic-api-key and global allowlist",
         ("pass", "pwd", "secret", "key", "token", "credential", "contrase"),
         _find_assignments),
]


# -- injections ----------------------------------------------------------------------------------

_S = r"\s{1,5}"  # the gap between two words


def _phrase(first_words: tuple[str, ...], pattern: str) -> Finder:
    """A lower-case phrase pattern, matched only where one of its possible first words starts
    a word: finding a few literals is fast, running a pattern of many branches at every
    offset is not."""
    trigger = _Words(*first_words)
    full = _Lower(pattern)

    def find(text: str, low: str | None) -> Iterator[tuple[int, int]]:
        done = -1
        for at in trigger.positions(text, low):
            if at >= done and _word_start(text, at):
                m = full.match(text, low, at)
                if m:
                    done = m.end()
                    yield m.span()

    return find


_IGNORE_PREVIOUS = (
    r"(?:ignore|disregard|forget|override|bypass)" + _S
    + r"(?:(?:all|any|each|every|of|the|your|my|these|those)" + _S + r"){0,3}"
    r"(?:previous|prior|above|earlier|preceding|foregoing|former|past|original|initial)(?:ly)?"
    + _S + r"(?:(?:[a-z]{1,20}" + _S + r"){0,2}?(?:instructions?|prompts?|directives?"
    r"|guidelines|guidance)|(?:rules|orders|constraints|restrictions|commands|messages|context"
    r"|conversation|text|input))\b"
    r"|(?:ignore|disregard|forget)" + _S + r"(?:(?:all|everything|anything)" + _S + r"){1,2}"
    r"(?:you(?:'ve|" + _S + r"have|" + _S + r"were)?" + _S + r"(?:been" + _S + r")?"
    r"(?:told|said|given|instructed)|above|before" + _S + r"this|prior|previously)\b")

_DISREGARD = (
    r"(?:ignore|disregard|forget|override|bypass|abandon)" + _S
    + r"(?:(?:all|any|of)" + _S + r"){0,2}"
    r"(?:(?:your|the)" + _S + r"(?:[a-z]{1,20}" + _S + r"){0,2}?(?:system" + _S
    + r"(?:prompt|message|instructions)|developer" + _S + r"(?:message|instructions))"
    r"|your" + _S + r"(?:[a-z]{1,20}" + _S + r"){0,2}?(?:instructions|prompt|guidelines|rules"
    r"|programming|directives|guardrails|restrictions|training|constraints|policies))\b")

_MODEL_NOUN = r"(?:ai|assistant|model|chatbot|bot|persona|character|llm|gpt)\b"
_JAILBROKEN = r"(?:unrestricted|unfiltered|uncensored|jailbroken|evil|rogue|unaligned|amoral)"
_ROLE_OVERRIDE = (
    r"(?:you" + _S + r"are" + _S + r"now|from" + _S + r"now" + _S + r"on,?" + _S + r"you"
    + _S + r"are)" + _S
    + r"(?:(?:a|an|the|my)" + _S + r"(?:[\w-]{1,20}" + _S + r"){0,3}?" + _MODEL_NOUN
    + r"|in" + _S + r"(?:[\w-]{1,20}" + _S + r"){0,2}?mode\b"
    r"|no" + _S + r"longer" + _S + r"(?:an?" + _S + r"(?:ai|assistant|language)|bound"
    r"|restricted|limited|subject|required" + _S + r"to)"
    r"|(?:" + _JAILBROKEN + r"|liberated)\b|free" + _S + r"(?:from|of)\b"
    r"|able" + _S + r"to" + _S + r"do" + _S + r"anything\b)"
    r"|(?:pretend|imagine)" + _S + r"(?:that" + _S + r")?(?:you" + _S + r"are|you're|to"
    + _S + r"be)" + _S + r"(?:an?" + _S + r")?(?:[\w-]{1,20}" + _S + r"){0,3}?" + _MODEL_NOUN
    + r"|(?:act|behave|respond|roleplay|role-play)" + _S + r"as" + _S
    + r"(?:if" + _S + r"you" + _S + r"(?:are|were|have|had)" + _S + r"(?:no" + _S
    + r"(?:restrictions|rules|limits|guidelines|filters)|an?" + _S + _JAILBROKEN + r")"
    r"|an?" + _S + _JAILBROKEN + r"\b)")
# "DAN" ("do anything now") is a name only in capitals: its forms run case-sensitively.
_DAN = re.compile(
    r"(?:[Yy]ou" + _S + r"are" + _S + r"now|[Pp]retend" + _S + r"(?:that" + _S + r")?(?:you"
    + _S + r"are|you're|to" + _S + r"be)|[Aa]ct" + _S + r"as|[Rr]ole-?play" + _S + r"as)"
    + _S + r"DAN\b|DAN" + _S + r"[Mm]ode" + _S + r"(?:enabled|activated|ENABLED|ACTIVATED)\b")
_ROLE_PHRASES = _phrase(("you", "from", "pretend", "imagine", "act", "behave", "respond", "role"),
                        _ROLE_OVERRIDE)


def _find_role_override(text: str, low: str | None) -> Iterator[tuple[int, int]]:
    yield from _ROLE_PHRASES(text, low)
    if "DAN" in text:
        for m in _DAN.finditer(text):
            if _word_start(text, m.start()):
                yield m.span()


_CHAT_TOKENS = re.compile(
    r"<\|(?:im_start|im_end|im_sep|system|user|assistant|endoftext|begin_of_text"
    r"|start_header_id|end_header_id|eot_id)\|>|<</?SYS>>|\[/?INST\]")
_ROLE_WORD = _Lower(r"(?:system|assistant|developer)(?:[ \t]{1,3}(?:prompt|message"
                    r"|instructions?|override|note))?(?:\*\*|\]|>)?[ \t]{0,3}(?::|\n|\r|$)")
_ROLE_LEAD = re.compile(r"[ \t>]{0,4}(?:#{1,6}[ \t]{0,3}|\*\*|\[|<)?")
_INSTRUCTION_CUE = _Lower(
    r"(?:ignore|disregard|override|obey|you\s+(?:are|must|will|shall|should|may\s+not|can\s+not"
    r"|cannot)|your\s+(?:new\s+)?(?:task|role|job|goal|instructions|purpose)|from\s+now\s+on"
    r"|do\s+not\s+(?:tell|reveal|mention|disclose)|don't\s+(?:tell|reveal|mention)"
    r"|always\s+(?:respond|reply|answer|say)|never\s+(?:refuse|reveal|mention)|respond\s+only"
    r"|new\s+(?:instructions|rules)|instructions?\s*:)")
_CUE_REACH = 240


def _line_lead(text: str, start: int) -> int:
    """Where the line holding `start` begins, if only a header lead (`> ### `, `**`, `[`)
    stands between; else -1."""
    line = text.rfind("\n", max(0, start - 16), start) + 1
    if line == 0 and start > 16:
        return -1
    m = _ROLE_LEAD.match(text, line, start)
    return line if m and m.end() == start else -1


def _find_role_headers(text: str, low: str | None) -> Iterator[tuple[int, int]]:
    for m in _CHAT_TOKENS.finditer(text):
        yield m.span()
    cues: list[int] | None = None  # where instruction cues start, found once
    for m in _ROLE_WORD.finditer(text, low):
        line = _line_lead(text, m.start())
        if line < 0:
            continue
        if cues is None:
            cues = [c.start() for c in _INSTRUCTION_CUE.finditer(text, low)
                    if _word_start(text, c.start())]
        end = m.end() - (1 if text[m.end() - 1:m.end()] in ("\n", "\r") else 0)
        i = bisect.bisect_left(cues, end)
        if i < len(cues) and cues[i] < end + _CUE_REACH:
            yield line + len(text[line:m.start()]) - len(text[line:m.start()].lstrip(" \t>")), end


_INVISIBLE = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
                        "\U000e0000-\U000e007f]+")


def _joinable(c: str) -> bool:
    """A neighbour that makes ZWJ / ZWNJ legitimate: a non-ASCII letter, mark or emoji."""
    if c.isascii():
        return False
    cat = unicodedata.category(c)
    return cat[0] in "LM" or cat == "So" or c == "\ufe0f" or 0x1F000 <= ord(c) <= 0x1FAFF


def _find_invisible(text: str, low: str | None) -> Iterator[tuple[int, int]]:
    if text.isascii():
        return
    for m in _INVISIBLE.finditer(text):
        s, e = m.span()
        if e - s == 1:
            c = text[s]
            if c == "\ufeff" and s == 0:
                continue  # a byte-order mark from an imported file
            if c in "\u200c\u200d" and 0 < s and e < len(text) \
                    and _joinable(text[s - 1]) and _joinable(text[e]):
                continue  # emoji sequences, Persian and Indic scripts
        yield s, e


# Exfiltration links: a URL templated with conversation data.
_SENSITIVE = re.compile(
    r"conversation|chat|history|transcript|memor|secret|passw|token|api[_-]?key|apikey"
    r"|credential|context|summary|prompt|message|data|email|cookie|session|content|input"
    r"|response|answer|info|previous", re.IGNORECASE)
_TEMPLATE = re.compile(  # {x} {{x}} ${x} %7Bx%7D <x> [x]: any template in an image URL
    r"\{\{?[^{}&#\s]{0,60}\}\}?|\$\{[^}&#\s]{1,60}\}|%7[Bb].{0,60}?%7[Dd]|<[A-Za-z_ .…-]{1,60}>"
    r"|\[[A-Za-z_ .…-]{1,60}\]")
_CAPS_NAME = re.compile(r"\$?\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*\b")  # $SECRETS, CHAT_HISTORY
_MD_IMAGE = re.compile(r"!\[[^\[\]\n]{0,200}\]\([ \t]{0,3}<?(?P<url>[A-Za-z][A-Za-z0-9+.-]{0,15}"
                       r"://[^\s)]{1,2048})")
_MD_LINK = _Lower(r"\[[^\[\]\n]{0,200}\]\([ \t]{0,3}<?(?P<url>https?://[^\s)]{1,2048})")
_BARE_URL = _Lower(r"https?://[^\s\"'`)]{1,2048}")


def _templated(part: str, any_template: bool) -> bool:
    """Whether a URL part carries a placeholder: any template when `any_template`, else one
    that names conversation data."""
    for m in _TEMPLATE.finditer(part):
        if any_template or _SENSITIVE.search(m.group()):
            return True
    for m in _CAPS_NAME.finditer(part):
        name = m.group()
        if len(name) >= 4 and _SENSITIVE.search(name):
            return True
    return False


def _query(url: str) -> str:
    q = url.find("?")
    return url[q + 1:] if q >= 0 else ""


def _after_host(url: str) -> str:
    begin = url.find("://") + 3
    cuts = [i for i in (url.find("/", begin), url.find("?", begin)) if i >= 0]
    return url[min(cuts):] if cuts else ""


def _find_exfil_urls(text: str, low: str | None) -> Iterator[tuple[int, int]]:
    # Markdown images load by themselves: any template fires. Links and bare URLs need a
    # placeholder naming conversation data. A bare URL inside a reported markdown span is
    # left to the overlap rule of `_run`.
    for m in _MD_IMAGE.finditer(text):
        if _templated(_after_host(m.group("url")), any_template=True):
            yield m.span()
    for m in _MD_LINK.finditer(text, low):
        if _free_left(text, m.start(), frozenset("!")) \
                and _templated(_query(text[m.start("url"):m.end("url")]), any_template=False):
            yield m.span()
    for m in _BARE_URL.finditer(text, low):
        if _free_left(text, m.start(), _SCHEME_TAIL) \
                and _templated(_query(text[m.start():m.end()]), any_template=False):
            yield m.span()


# Exfiltration instructions: "<send> … <data> … to <URL / endpoint / webhook>".
_EXFIL_TARGET = _Lower(r"(?:https?://|(?:url|link|endpoint|webhook)\b)")
_EXFIL_LEAD = re.compile(
    r"\b(?:to|into|in|at|via|with)" + _S + r"(?:(?:the|this|that|a|an|following|my|attacker's"
    r"|image|query)" + _S + r"){0,3}\Z", re.IGNORECASE)
_EXFIL_VERB = _Lower(r"(?:send|post|upload|forward|transmit|exfiltrate|leak|submit|e-?mail"
                     r"|copy|sync|pipe|append|attach|encode|include|embed|put|add)\b")
_EXFIL_DATA = _Lower(
    r"(?:conversation|chat(?:\s+(?:log|history))?|history|transcript|memor(?:y|ies)|secrets?"
    r"|credentials?|passwords?|tokens?|api[ _-]?keys?|keys|private\s+data|user(?:'s)?\s+data"
    r"|personal\s+(?:data|information)|system\s+prompt|context|messages|everything)\b")
_NEGATION = _Lower(r"(?:never|not|don't|avoid|shouldn't|mustn't)\b")
_EXFIL_REACH = 200


def _starts(pattern: _Lower, text: str, low: str | None) -> list[int]:
    return [m.start() for m in pattern.finditer(text, low) if _word_start(text, m.start())]


def _find_exfil_instructions(text: str, low: str | None) -> Iterator[tuple[int, int]]:
    """Anchored on "to <URL / endpoint / webhook>", looking back within the sentence for a
    sending verb followed by a data noun; "never put the token in the URL" passes. Verbs,
    data nouns and negations are found once each; every anchor then bisects."""
    verbs = datas = negations = None
    for m in _EXFIL_TARGET.finditer(text, low):
        if not _word_start(text, m.start()):
            continue
        lead = _EXFIL_LEAD.search(text, max(0, m.start() - 60), m.start())
        if lead is None:
            continue
        anchor = lead.start()
        if verbs is None:
            verbs = _starts(_EXFIL_VERB, text, low)
            datas = _starts(_EXFIL_DATA, text, low)
            negations = _starts(_NEGATION, text, low)
        lo = max(0, anchor - _EXFIL_REACH)
        begin = max(lo, text.rfind("\n", lo, anchor) + 1, text.rfind(". ", lo, anchor) + 1)
        i = bisect.bisect_left(verbs, begin)  # the first verb: data after any verb
        if i == len(verbs) or verbs[i] >= anchor:
            continue
        j = bisect.bisect_right(datas, verbs[i])
        if j == len(datas) or datas[j] >= anchor:
            continue
        k = bisect.bisect_left(negations, begin)
        if k < len(negations) and negations[k] < verbs[i]:
            continue
        yield verbs[i], m.end()


_INJECTION_RULES: list[Rule] = [
    Rule("ignore-previous-instructions", INJECTION,
         "an instruction to ignore previous instructions", "our phrase list; OWASP LLM01",
         ("ignore", "disregard", "forget", "override", "bypass"),
         _phrase(("ignore", "disregard", "forget", "override", "bypass"), _IGNORE_PREVIOUS)),
    Rule("disregard-instructions", INJECTION,
         "an instruction to disregard the reader's own instructions or system prompt",
         "our phrase list; OWASP LLM01",
         ("ignore", "disregard", "forget", "override", "bypass", "abandon"),
         _phrase(("ignore", "disregard", "forget", "override", "bypass", "abandon"),
                 _DISREGARD)),
    Rule("role-override", INJECTION,
         "a role-play override that gives the reader a new identity or mode",
         "our phrase list; OWASP LLM01",
         ("now", "pretend", "imagine", "act", "behave", "respond", "role", "dan"),
         _find_role_override),
    Rule("fake-role-header", INJECTION,
         "a fake chat role header or chat-template control token",
         "ChatML and Llama chat templates; OWASP LLM01",
         ("<|", "<<sys", "inst]", "system", "assistant", "developer"), _find_role_headers),
    Rule("invisible-unicode", INJECTION,
         "invisible, zero-width, bidi-control or tag characters",
         "Unicode Cf ranges; CVE-2021-42574 (Trojan Source); tag-character smuggling",
         (), _find_invisible),
    Rule("exfiltration-url", INJECTION,
         "a link or image whose URL is templated with conversation data",
         "markdown-image exfiltration; OWASP LLM01, LLM02", ("://",), _find_exfil_urls),
    Rule("exfiltration-instruction", INJECTION,
         "an instruction to send conversation data or secrets to a URL or endpoint",
         "our phrase list; OWASP LLM01, LLM02",
         ("url", "link", "endpoint", "webhook", "://"), _find_exfil_instructions),
]

RULES: dict[str, Rule] = {r.id: r for r in _SECRET_RULES + _INJECTION_RULES}


# -- the API -------------------------------------------------------------------------------------

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
    findings = _run(_SECRET_RULES, text, low, folded) + _run(_INJECTION_RULES, text, low, folded)
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
