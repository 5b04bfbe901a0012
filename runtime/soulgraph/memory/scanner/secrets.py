"""Secret rules: credentials a memory must never hold. Each finding refuses the write.

The facts (prefixes, lengths, character classes, placeholder lists) come from the maintained
rule sets named in each rule's `source`; the table and the judgment calls are in the
package's docstring (`soulgraph.memory.scanner`).

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
- A private-key header alone ("the file starts with -----BEGIN OPENSSH PRIVATE KEY-----")
  passes; a header followed by key material (a base64 line of 32+ characters) fires, with or
  without its END line (a truncated key is still key material).
- `AKIA…EXAMPLE` (AWS's documentation key) passes, as in gitleaks. Stripe test keys fire
  (they authenticate, to test-mode data). A Twilio account SID (`AC…`) is an identifier, not
  a credential: only API keys (`SK…`) fire; an auth token is caught as an assignment.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Iterator

from soulgraph.memory.scanner.matching import (ALNUM, LETTERS, SCHEME_TAIL, SECRET, TRAILING, WORD, Lower, Rule, Words, classes,
                                               free_left, token, valued)

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


def is_placeholder(value: str) -> bool:
    low = value.lower()
    if low.startswith(_REFERENCE_START) or set(value) <= _FILLER:
        return True
    return any(w in low for w in _PLACEHOLDER_WORDS)


def _looks_secret(value: str) -> bool:
    """Whether an assigned value looks like a real credential (see the module docstring)."""
    if len(value) < 6 or is_placeholder(value):
        return False
    if "(" in value or "[" in value or _NUMBERISH.fullmatch(value) \
            or _DOTTED_NAME.fullmatch(value) or _IDENTIFIER.fullmatch(value):
        return False  # code: a call, an index, a number, a name
    words = value.replace("-", "").replace("_", "").replace(".", "")
    if words.isalpha() and (words.islower() or words.isupper() or value.istitle()):
        return len(value) >= 16  # a word or two ("Required", "sk-test"), not a passphrase
    return classes(value) >= 2




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
    return value.lower() not in _URL_PW_PLACEHOLDERS and not is_placeholder(value)


_URL_USERINFO = re.compile(r"://[^\s:/?#@\"'<>]{0,100}:(?P<v>[^\s/?#@\"'<>]{1,200})@"
                           r"(?=[A-Za-z0-9\[])")


def _has_scheme(text: str, colon: int) -> bool:
    """A URL scheme (a letter, then up to 15 of letters, digits, + . -) ends at `colon`."""
    i = colon
    while i > 0 and colon - i < 16 and text[i - 1] in SCHEME_TAIL:
        i -= 1
    return i < colon and text[i] in LETTERS and (i == 0 or text[i - 1] not in SCHEME_TAIL)


def _find_url_credentials(text: str, low: str | None) -> Iterator[tuple[int, int]]:
    for m in _URL_USERINFO.finditer(text):
        if _has_scheme(text, m.start()) and _url_password(m.group("v")):
            yield m.span("v")


_BEARER = Lower(r"bearer[ \t]{1,5}(?P<v>[a-z0-9._~+/-]{20,4000}=*)")
_BASIC = Lower(r"authorization[\"']?[ \t]{0,3}[:=][ \t]{0,5}[\"']?basic[ \t]{1,5}"
                r"(?P<v>[a-z0-9+/]{8,1000}={0,2})")


def _find_auth_headers(text: str, low: str | None) -> Iterator[tuple[int, int]]:
    for m in _BEARER.finditer(text, low):
        value = text[m.start("v"):m.end("v")]
        if free_left(text, m.start(), ALNUM) and not is_placeholder(value) \
                and classes(value) >= 2:
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
_ASSIGNMENT_CORE = Words("pass", "pwd", "secret", "key", "token", "credential", "contrase")
_ASSIGNMENT = Lower(
    r"(?:passw(?:or)?d|pass|pwd|passphrase|contrase(?:ñ|n)a|secret(?:[_-]?(?:access[_-]?)?key)?"
    r"|credentials?|key|token)(?![a-z0-9_])"
    r"(?P<c>[\]\"'*`)]{0,3})[ \t]{0,3}(?::=|=>|={1,3}|!==?|:)(?![=:/])[ \t]{0,3}@?"
    r"(?P<q>[\"'`]?)(?P<v>[^\s\"'`]{1,200})")
_KEY_PREFIX = Lower(r"(?:api|app|auth|access|client|private|priv|service|account|db|database"
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
        value = _ESCAPE.split(text[start:m.end("v")], 1)[0].rstrip(TRAILING)
        if value and _looks_secret(value):
            yield start, start + len(value)


_ESCAPE = re.compile(r"\\[nrt]")  # a value quoted in source code ends at an escape: "…:\n"


def _name_start(text: str, start: int) -> bool:
    if start == 0 or text[start - 1] not in LETTERS:
        return True
    before, first = text[start - 1], text[start]
    return ("a" <= before <= "z" or before.isdigit()) and "A" <= first <= "Z"


_AWS_SECRET = Lower(
    r"aws[a-z0-9_.-]{0,20}?(?:secret|key)[a-z0-9_.-]{0,20}[\]\"']{0,2}[ \t]{0,3}"
    r"(?::=|=>|=|:)[ \t]{0,3}[\"']?(?P<v>[a-z0-9/+]{40})(?![a-z0-9/+=])")

_WORD_OR_DASH = WORD | {"-"}

SECRET_RULES: list[Rule] = [
    Rule("private-key-block", SECRET, "a private key block (PEM, OpenSSH, PGP or PuTTY)",
         "detect-secrets PrivateKeyDetector; gitleaks private-key",
         ("private key", "putty-user-key-file"), _find_private_keys),
    Rule("aws-access-key-id", SECRET, "an AWS access key id",
         "gitleaks aws-access-token; detect-secrets AWSKeyDetector",
         ("akia", "asia", "abia", "acca", "a3t"),
         token(r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])",
                check=_not_example)),
    Rule("aws-secret-access-key", SECRET, "an AWS secret access key assigned to an aws key name",
         "detect-secrets AWSKeyDetector", ("aws",),
         valued(_AWS_SECRET, lambda v: classes(v) >= 2 and not is_placeholder(v),
                 lambda text, start: free_left(text, start, LETTERS))),
    Rule("github-token", SECRET, "a GitHub token (personal, OAuth, app or refresh)",
         "detect-secrets GitHubTokenDetector; GitHub token formats (2021-04-05)",
         ("_",),
         token(r"gh[pousr]_[A-Za-z0-9]{36,251}(?![A-Za-z0-9_])", WORD)),
    Rule("github-fine-grained-pat", SECRET, "a GitHub fine-grained personal access token",
         "gitleaks github-fine-grained-pat", ("_",),
         token(r"github_pat_[A-Za-z0-9_]{50,255}(?![A-Za-z0-9_])", WORD)),
    Rule("gitlab-token", SECRET, "a GitLab token",
         "detect-secrets GitLabTokenDetector; gitleaks gitlab-pat",
         ("gl",),
         token(r"gl(?:pat|oas|dt|rt|cbt|ptt|ft|imt|agent|soat)-[A-Za-z0-9_-]{20,50}"
                r"(?![A-Za-z0-9_-])", _WORD_OR_DASH)),
    Rule("slack-token", SECRET, "a Slack token",
         "detect-secrets SlackDetector; gitleaks slack-app-token", ("xox", "xapp"),
         token(r"xox[abposr]-(?:[0-9]{1,20}-){1,4}[A-Za-z0-9-]{6,200}"
                r"|xapp-[0-9]-[A-Z0-9]{6,20}-[0-9]{6,20}-[A-Za-z0-9]{20,100}")),
    Rule("slack-webhook-url", SECRET, "a Slack incoming-webhook URL",
         "detect-secrets SlackDetector; gitleaks slack-webhook-url", ("hooks.slack",),
         token(r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/"
                r"[A-Za-z0-9+/_-]{20,200}", frozenset())),
    Rule("stripe-key", SECRET, "a Stripe secret or restricted key",
         "detect-secrets StripeDetector; gitleaks stripe-access-token",
         ("_",),
         token(r"[sr]k_(?:live|test|prod)_[A-Za-z0-9]{20,247}(?![A-Za-z0-9])", WORD)),
    Rule("anthropic-api-key", SECRET, "an Anthropic API key",
         "gitleaks anthropic-api-key, anthropic-admin-api-key", ("sk-",),
         token(r"sk-ant-[A-Za-z0-9_-]{32,300}", _WORD_OR_DASH)),
    Rule("openai-api-key", SECRET, "an OpenAI API key",
         "detect-secrets OpenAIDetector; gitleaks openai-api-key", ("sk-",),
         token(r"sk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,300}"
                r"|[A-Za-z0-9]{32,200}(?![A-Za-z0-9_-]))", _WORD_OR_DASH)),
    Rule("google-api-key", SECRET, "a Google API key", "gitleaks gcp-api-key", ("aiza",),
         token(r"AIza[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])", _WORD_OR_DASH)),
    Rule("huggingface-token", SECRET, "a Hugging Face access token",
         "gitleaks huggingface-access-token, huggingface-organization-api-token",
         ("_",),
         token(r"(?:hf|api_org)_[A-Za-z0-9]{34}(?![A-Za-z0-9_])", WORD)),
    Rule("npm-token", SECRET, "an npm access token",
         "gitleaks npm-access-token; detect-secrets NpmDetector", ("_",),
         token(r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9_])", WORD)),
    Rule("pypi-token", SECRET, "a PyPI upload token", "detect-secrets PypiTokenDetector", ("pypi-",),
         token(r"pypi-(?:AgEIcHlwaS5vcmc|AgENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{70,2000}")),
    Rule("sendgrid-api-key", SECRET, "a SendGrid API key", "detect-secrets SendGridDetector", ("sg.",),
         token(r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])", _WORD_OR_DASH)),
    Rule("twilio-api-key", SECRET, "a Twilio API key",
         "detect-secrets TwilioKeyDetector; gitleaks twilio-api-key", ("sk",),
         token(r"SK[0-9a-fA-F]{32}(?![A-Za-z0-9])")),
    Rule("jwt", SECRET, "a JSON Web Token",
         "detect-secrets JwtTokenDetector; gitleaks jwt", ("eyj",),
         # the lookbehind after the literal stops a run of "eyJeyJ…" rescanning itself
         token(r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,2000}\.eyJ[A-Za-z0-9_-]{8,8000}"
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
