"""Secret rules: credentials a memory must never hold. Each finding refuses the write.

Two kinds of rule, run in this order (a finding overlapping an earlier one is dropped, so a
hand rule's id and span win):

- hand-written rules (`HAND_RULES`, the table's named rows): our own patterns over the facts
  (prefixes, lengths, character classes, placeholder lists) that the maintained rule sets
  publish, with the placeholder judgment below;
- the rule sets' own rules (`DATA_RULES`, the table's `…:*` rows): every rule of Nosey Parker's,
  gitleaks' and detect-secrets' default rule sets that finds a secret (not an identifier),
  converted to Python `re` by scripts/build_secret_rules.py into `secret_rules/rules.json`
  (licences and the commits read in `secret_rules/NOTICE`; the rules left out, with the
  reason, in the JSON's `skipped`). Their ids are the upstream ones, prefixed:
  `noseyparker:np.github.1`, `gitleaks:github-pat`, `detect-secrets:DiscordBotTokenDetector.1`.

"detect-secrets" is Yelp's detect-secrets (`detect_secrets/plugins/*`), "gitleaks" is gitleaks'
default rule set (`config/gitleaks.toml`), "Nosey Parker" is Praetorian's
(`crates/noseyparker/data/default/builtin/rules/*.yml`).

`find_secrets(text, low, folded)` runs them all in that order: cheap gates shared by many rules
(a character the pattern needs, a long letters-and-digits run, keywords tested once a text)
leave an ordinary note with one or two rules to run. Running `SECRET_RULES` one by one finds
the same secrets at many times the cost. Figures and the choice of data over a dependency:
docs/decisions/secret-rule-sets.md, measured by bench/bench_secret_rules.py.

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
| `azure-devops-pat` | secret | Microsoft's 84-character Azure DevOps token format (`JQQJ9` at 52, `AZDO` at 76); Nosey Parker `np.azure.4` (a newer rule than the files read) |
| `kerberos-hash` | secret | hashcat's Kerberos formats (`$krb5asrep$23$…`, `$krb5tgs$23$…`); Nosey Parker `np.krb5.*` (newer rules than the files read) |
| `jwt` | secret | detect-secrets JwtTokenDetector (`eyJ…` segments that decode to JSON); gitleaks `jwt` |
| `url-credentials` | secret | detect-secrets BasicAuthDetector (`scheme://user:password@host`) |
| `authorization-header` | secret | gitleaks `curl-auth-header` (`Authorization: Bearer …` / `Basic …`) |
| `password-in-prose` | secret | our own: a secret word, then "is", "was" or "is:", then a value with two or more character classes ("my bank password is hunter2!") |
| `noseyparker:*` | secret | Nosey Parker's rules (ids `np.*`), pattern and secret group as published; keywords taken from each pattern's literals |
| `gitleaks:*` | secret | gitleaks' rules, with their keywords, entropy floors and allowlists (the allowlists' literal example keys as digests) |
| `detect-secrets:*` | secret | detect-secrets' plugins' denylist patterns (`…Detector.N`, the N-th pattern of a plugin) |
| `credential-assignment` | secret | detect-secrets KeywordDetector (secret-sounding names, its FALSE_POSITIVES values); gitleaks `generic-api-key` and its global allowlist (placeholders, `$VAR`, `${…}`, `{{…}}`, system paths) |

Judgment calls (tests/test_scanner.py and tests/test_secret_rules.py hold an example of each):

- Placeholders pass, whichever rule finds them: a value holding `example`, `placeholder`,
  `redacted`, `changeme`, `dummy`, `your_`/`your-`/`<your`, `xxxxx`, `***`, `...`, `${`, `$(`,
  `{{`, `%s`, `abcdefgh`, `abc123`, `123456789` or `987654321`, or mostly one character repeated (8 or
  more, a third of the value: `AKIAXXXXXXXXXXXXXXXX`, `aaaa…aaend`). So AWS's documentation key
  `AKIAIOSFODNN7EXAMPLE`, Stripe test keys written as `sk_test_example…`, `ghp_xxxx…` and
  gitleaks' allowlisted documentation keys (Google's published sample API keys, kept as
  digests) pass; a Stripe test key with a random body is refused (it authenticates, to test
  data). Private key blocks are judged by their own rule (a key's body holds `AAAAAAAA`).
- A password told in prose is refused: a secret word (password, passphrase, passcode, pwd,
  secret, api key, access token), then "is", "was" or "is:", then a value with two or more
  character classes ("my bank password is hunter2!"); "the password is strong", "my password
  was reset" and digits alone ("the pin is 1234") pass.
- The rule sets' rules are taken as published, with four changes a memory needs: a token may
  end a sentence (gitleaks' token terminator also takes `.`, `,`, `!`, `?`, `:` and closing
  brackets before whitespace); a pattern anchored as a whole line is anchored at word
  boundaries; gitleaks' prefix rules take a token only when it is not part of a longer word
  (`GR1348941` and 20 characters inside a 60-character word is not a runner token); and
  four patterns are rewritten so Python's backtracking engine stays linear (curl's options
  within 500 characters a line, Gradle's and PHPMailer's skipped comment lines, detect-secrets'
  npm and OpenAI prefixes). Identifiers are left out (client ids, bucket names, account ids,
  public keys, user names), and so are gitleaks' `generic-api-key` and both rule sets' PEM
  rules, which the hand rules cover with the judgment above.
- The user info of a `postgres://` or `mongodb://` URL is judged as `url-credentials` judges
  any URL's: `user:password@` and `user:secret@` are placeholders. gitleaks' JWT rule gets the
  `jwt` rule's check (header and payload decode to JSON); detect-secrets' Slack pattern gets
  the `slack-token` rule's (a random last part: `xoxp-1-initial` passes). gitleaks' prefix
  rules take no token inside a longer word, `_` counting as a word character.

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
import bisect
import hashlib
import json
import math
import os
import re
from typing import Iterator

from soulgraph.memory.scanner.matching import (ALNUM, DIGITS, LETTERS, LONG_TEXT, SCHEME_TAIL, SECRET, TRAILING, WORD,
                                               Finding, Lower, Rule, Words, classes, free_left, holds_any, pieces, token,
                                               unspaced, valued)

# gitleaks' allowlist say the same): placeholders, references, paths, templates.
_PLACEHOLDER_WORDS = ("your", "example", "placeholder", "redacted", "changeme", "change_me",
                      "change-me", "dummy", "sample", "replace", "xxx", "***", "...", "…",
                      "<", ">", "todo", "insert", "notreal", "not_real", "not-real")
_REFERENCE_START = ("<", "{", "$", "%", "[", "!vault", "#", "/", "~/", "./", "../", "@",
                    "(", "env:", "vault:", "op://", "file:", "http://", "https://", "arn:")
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


def _slack_tail(m: re.Match[str]) -> bool:
    """The token's last part is random: 8 or more characters, letters and digits both
    (`xoxp-1-initial`, `xoxe.xoxp-1-RANDOMSTRINGHERE` and a digits-only tail are not)."""
    tail = m.group().rsplit("-", 1)[-1]
    return len(tail) >= 8 and any(c.isdigit() for c in tail) and any(c.isalpha() for c in tail)


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
_PUBLIC = Lower(r"(?:public|publishable)[_.-]?\Z")
_PUBLIC_REACH = 12  # len("publishable_")


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
        if _PUBLIC.search(text, low, max(0, name - _PUBLIC_REACH), name):
            continue  # `publicToken`, `publishable_key`: meant to be shipped
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


# A password told in prose: "my bank password is hunter2!", "the wifi password was Tr0ub4dor&3".
# The value must look like a password, not a word: two or more character classes (letters
# and digits or symbols), not a placeholder, a number or a version ("the password is strong",
# "my password was reset", "the pin is 1234" pass).
_PROSE = Lower(r"(?:pass(?:word|phrase|code)?|passwd|pwd|secret(?: key)?|api key|access token)"
               r"[ \t]{1,3}(?:is|was)[ \t]{0,2}:?[ \t]{1,3}"
               r"[\"'`\u201c\u2018]?(?P<v>[^\s\"'`\u201d\u2019]{4,100})")
_PROSE_CORE = Words("pass", "pwd", "secret", "api key", "access token")


def _prose_password(value: str) -> bool:
    if is_placeholder(value) or _NUMBERISH.fullmatch(value) or _DOTTED_NAME.fullmatch(value):
        return False
    return classes(value) >= 2 and any(c.isalpha() for c in value)


def _find_prose_passwords(text: str, low: str | None) -> Iterator[tuple[int, int]]:
    done = -1
    for at in _PROSE_CORE.positions(text, low):
        if at < done or not free_left(text, at, LETTERS):
            continue
        m = _PROSE.match(text, low, at)
        if m is None:
            continue
        done = m.end()
        start = m.start("v")
        value = text[start:m.end("v")].rstrip(TRAILING)
        if value and _prose_password(value):
            yield start, start + len(value)


_AWS_SECRET = Lower(
    r"aws[a-z0-9_.-]{0,20}?(?:secret|key)[a-z0-9_.-]{0,20}[\]\"']{0,2}[ \t]{0,3}"
    r"(?::=|=>|=|:)[ \t]{0,3}[\"']?(?P<v>[a-z0-9/+]{40})(?![a-z0-9/+=])")

_WORD_OR_DASH = WORD | {"-"}

_HAND_RULES: list[Rule] = [
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
         token(r"gl(?:(?:pat|dt|rt|ft|soat|ffct)-[A-Za-z0-9_-]{20}(?:[A-Za-z0-9_-]{7,280}"
                r"\.[0-9a-z]{9})?|cbt-[0-9a-zA-Z]{1,5}_[A-Za-z0-9_-]{20}|ptt-[0-9a-f]{40}"
                r"|imt-[A-Za-z0-9_-]{25}|agent-[A-Za-z0-9_-]{50}|oas-[A-Za-z0-9_-]{64})"
                r"(?![A-Za-z0-9_-])", _WORD_OR_DASH)),
    Rule("slack-token", SECRET, "a Slack token",
         "detect-secrets SlackDetector; gitleaks slack-app-token", ("xox", "xapp"),
         token(r"xox[abposr]-(?:[0-9]{1,20}-){1,4}[A-Za-z0-9-]{6,200}"
                r"|xapp-[0-9]-[A-Z0-9]{6,20}-[0-9]{6,20}-[A-Za-z0-9]{20,100}", ALNUM,
                _slack_tail)),
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
         token(r"sk-ant-(?:api|admin)[0-9]{2}-[A-Za-z0-9_-]{93}AA(?![A-Za-z0-9_-])",
                _WORD_OR_DASH)),
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
    Rule("azure-devops-pat", SECRET, "an Azure DevOps personal access token",
         "Microsoft's 84-character key format (signature JQQJ9 at 52, AZDO at 76); Nosey Parker "
         "np.azure.4", ("jqqj9",),
         token(r"[A-Za-z0-9]{52}JQQJ9[A-Za-z0-9]{19}AZDO[A-Za-z0-9]{4}(?![A-Za-z0-9])")),
    Rule("kerberos-hash", SECRET, "a Kerberos AS-REP or TGS-REP hash (crackable offline)",
         "hashcat modes 18200, 13100, 19600-19800 ($krb5asrep$, $krb5tgs$); Nosey Parker np.krb5.*",
         ("$krb5",),
         token(r"\$krb5(?:asrep|tgs)\$(?:17|18|23)\$[^$\s]{0,300}\$?[0-9a-fA-F]{32,64}"
                r"\$[0-9a-fA-F]{64,10000}", frozenset())),
    Rule("jwt", SECRET, "a JSON Web Token",
         "detect-secrets JwtTokenDetector; gitleaks jwt", ("eyj",),
         # the lookbehind after the literal stops a run of "eyJeyJ…" rescanning itself
         token(r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,2000}\.eyJ[A-Za-z0-9_-]{8,8000}"
                r"(?:\.[A-Za-z0-9_-]{0,2000})?", _WORD_OR_DASH, _jwt_valid)),
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
    Rule("password-in-prose", SECRET, "a password told in a sentence (\"my password is …\")",
         "the scanner's own rule (the rule sets find passwords in code and configuration)",
         ("pass", "pwd", "secret", "api key", "access token"), _find_prose_passwords),
]



def _without_placeholders(rule: Rule) -> Rule:
    """The rule, its findings that are placeholders dropped (see `_placeholder_value`)."""
    find = rule.find

    def filtered(text: str, low: str | None) -> Iterator[tuple[int, int]]:
        for start, end in find(text, low):
            if not _placeholder_value(text[start:end]):
                yield start, end

    return Rule(rule.id, rule.kind, rule.description, rule.source, rule.keywords, filtered)


# A key block is judged by its own rule: a DER body holds runs such as AAAAAAAA.
HAND_RULES: list[Rule] = [r if r.id == "private-key-block" else _without_placeholders(r)
                          for r in _HAND_RULES]


# -- data-driven rules: Nosey Parker's and gitleaks' rule sets --------------------------------------
#
# secret_rules/rules.json is built by scripts/build_secret_rules.py from the two rule sets (their
# licences and the commits read are in secret_rules/NOTICE); it holds patterns already converted
# to Python syntax. Patterns compile on first use, so importing the scanner stays cheap.

_RULES_FILE = os.path.join(os.path.dirname(__file__), "secret_rules", "rules.json")
_MAX_FINDINGS = 100  # per rule and text, as `scanner.MAX_FINDINGS_PER_RULE`
_SOURCE_NAMES = {"noseyparker": "Nosey Parker", "gitleaks": "gitleaks", "detect-secrets": "detect-secrets"}

# A value that stands for a secret rather than being one, whichever rule found it: the
# documentation placeholders the rule sets' allowlists and stopwords name (…EXAMPLE keys,
# "your_…", xxxx…, a sequence such as abcdefgh or 123456789, templates and substitutions), a
# value that is mostly one character repeated (AKIAXXXXXXXXXXXXXXXX, aaaa…aaend), and the
# rule sets' own documented example keys (gitleaks' allowlists), which are kept as digests.
_PLACEHOLDER_VALUE = re.compile(
    r"example|placeholder|redacted|changeme|change_me|replace_?me|dummy|your[_-]|<your"
    r"|xxxxx|\*{3}|\.{3}|\$\{|\$\(|\{\{|%s|abcdefgh|abc123|123456789|987654321", re.IGNORECASE)
_REPEAT = re.compile(r"(.)\1{7,}")


def _placeholder_value(value: str) -> bool:
    if _PLACEHOLDER_VALUE.search(value):
        return True
    m = _REPEAT.search(value)
    if m and 10 * (m.end() - m.start()) >= 3 * len(value):
        return True
    if len(value) in _KNOWN_LENGTHS:
        return hashlib.sha256(value.encode("utf-8")).hexdigest() in _KNOWN_VALUES
    return False


# Rule-set rules whose secret is the password of a URL's user info.
_URL_PASSWORD_RULES = frozenset({"noseyparker:np.postgres.1", "noseyparker:np.mongodb.1",
                                 "detect-secrets:BasicAuthDetector.1"})


def _jwt_parts_valid(value: str) -> bool:
    """A JWT's header and payload decode to JSON objects (as the jwt rule checks)."""
    return _jwt_valid(_JWT_SHAPE.match(value) or _NO_MATCH)


# Rule-set rules that get the same check as the hand rule for the same kind of token (Nosey
# Parker's JWT rule keeps its own judgment: its examples include tokens whose header was
# altered, still credentials in the rule set's view).
_VALUE_CHECKS = {
    "gitleaks:jwt": _jwt_parts_valid,
    "detect-secrets:SlackDetector.1": lambda v: _slack_tail(_WHOLE.match(v)),
}
_JWT_SHAPE = re.compile(r"[^.]+\.[^.]+")
_WHOLE = re.compile(r".+", re.DOTALL)
_NO_MATCH = re.compile("x").match("x")  # a match whose two "parts" fail to decode


def _entropy(value: str) -> float:
    n = len(value)
    counts: dict[str, int] = {}
    for c in value:
        counts[c] = counts.get(c, 0) + 1
    return -sum(k / n * math.log2(k / n) for k in counts.values())


class _Spec:
    """One data rule: its pattern (compiled on first use) and the checks on a candidate."""

    __slots__ = ("body", "flags", "groups", "first_group", "whole_if_short", "url_password",
                 "check", "pivot", "entropy", "allow", "stopwords", "_pattern", "_allow")

    def __init__(self, raw: dict):
        self.body = raw["pattern"]
        self.flags = raw["flags"]
        self.groups = tuple(raw["groups"])
        self.first_group = raw["first_group"]
        # detect-secrets' groups may name only a prefix (`(ghp|gho|…)_…`): a group that short
        # is not the secret, the whole match is
        self.whole_if_short = raw["source"] == "detect-secrets"
        self.url_password = raw["id"] in _URL_PASSWORD_RULES
        self.check = _VALUE_CHECKS.get(raw["id"])
        # a literal every match holds `lo` to `hi` characters after its start: the pattern is
        # tried only there (a leading \b or lookbehind still holds: `match` at an offset
        # sees the characters before it)
        pivot = raw.get("pivot")
        self.pivot = None if not pivot else (tuple(pivot["literals"]), pivot["lo"], pivot["hi"],
                                             pivot["case"])
        self.entropy = raw["entropy"]
        self.allow = tuple(raw["allow"])
        self.stopwords = tuple(raw["stopwords"])
        self._pattern: re.Pattern[str] | None = None
        self._allow: tuple[re.Pattern[str], ...] | None = None

    @property
    def pattern(self) -> re.Pattern[str]:
        if self._pattern is None:
            flags = 0
            for c in self.flags:
                flags |= {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL,
                          "x": re.VERBOSE}[c]
            self._pattern = re.compile(self.body, flags)
        return self._pattern

    def matches(self, text: str, low: str | None) -> Iterator[re.Match[str]]:
        pattern = self.pattern
        if self.pivot is None or (low is None and not self.pivot[3]):
            yield from pattern.finditer(text)
            return
        literals, lo, hi, case = self.pivot
        hay = text if case else low
        found: list[int] = []
        for literal in literals:
            at = hay.find(literal)
            while at >= 0:
                found.append(at)
                at = hay.find(literal, at + 1)
        if len(literals) > 1:
            found.sort()
        done = 0  # starts below this were tried already, or lie inside a match
        for at in found:
            for start in range(max(done, at - hi), at - lo + 1):
                m = pattern.match(text, start)
                if m:
                    done = max(m.end(), start + 1)
                    yield m
                    break
            else:
                done = max(done, at - lo + 1)

    def span(self, m: re.Match[str]) -> tuple[int, int] | None:
        if not self.groups:
            return m.span()
        for g in self.groups:
            start, end = m.span(g)
            if end > start and not (self.whole_if_short and end - start < 8):
                return start, end
            if not self.first_group:
                return None
        return m.span() if self.whole_if_short else None

    def accept(self, value: str) -> bool:
        if self.url_password and not _url_password(value):
            return False  # user:password@ and user:secret@, as the url-credentials rule judges
        if self.check is not None and not self.check(value):
            return False
        if self.entropy and _entropy(value) < self.entropy:
            return False
        if self.allow:
            if self._allow is None:
                self._allow = tuple(re.compile(a) for a in self.allow)
            if any(a.search(value) for a in self._allow):
                return False
        if self.stopwords:
            low = value.lower()
            if any(w in low for w in self.stopwords):
                return False
        return True


def _word(c: str) -> bool:
    return c.isalnum() or c == "_"


def _data_finder(spec: _Spec, bounded: bool):
    def find(text: str, low: str | None) -> Iterator[tuple[int, int]]:
        for m in spec.matches(text, low):
            span = spec.span(m)
            if span is None:
                continue
            start, end = span
            # a token inside a longer one is not that token: gitleaks' prefix rules have no
            # right boundary (`GR1348941` and 20 characters also match a 60-character word)
            if bounded and ((start and _word(text[start]) and _word(text[start - 1])) or (
                    end < len(text) and _word(text[end - 1]) and _word(text[end]))):
                continue
            value = text[start:end]
            if spec.accept(value) and not _placeholder_value(value):
                yield span

    return find


def _load_data_rules() -> tuple[list[Rule], list[dict], frozenset[str], frozenset[int]]:
    with open(_RULES_FILE, encoding="utf-8") as f:
        data = json.load(f)
    rules: list[Rule] = []
    gates: list[dict] = []
    known = frozenset(data.get("known_values_sha256", ()))
    lengths = frozenset(data.get("known_value_lengths", ()))
    for raw in data["rules"]:
        source = _SOURCE_NAMES[raw["source"]]
        upstream = raw["id"].split(":", 1)[1]
        rule = Rule(raw["id"], SECRET, f"{raw['name']} ({source} rule {upstream})",
                    f"{source} {upstream}", tuple(raw["keywords"]),
                    _data_finder(_Spec(raw), raw["source"] == "gitleaks"))
        rules.append(rule)
        gates.append({"mixed": raw["mixed"], "min_secret": raw["min_secret"],
                      "chars": raw["gate_chars"], "chars2": raw["gate_chars2"],
                      "digit": raw["needs_digit"], "case": raw["keywords_case"],
                      "and": tuple(("\0" + k) if raw["keywords2_case"] else k
                                   for k in raw["keywords2"])})
    return rules, gates, known, lengths


DATA_RULES, _DATA_GATES, _KNOWN_VALUES, _KNOWN_LENGTHS = _load_data_rules()
SECRET_RULES: list[Rule] = HAND_RULES + DATA_RULES
"""Every secret rule in priority order: the hand-written rules above, then the rule sets'.
A finding overlapping an earlier rule's is dropped, so a hand rule's span and id win."""

# -- running them: a few cheap tests decide which rules can match at all ----------------------------
#
# A keyword test (`"twitter" in text`) scans the whole text; hundreds of them would cost far more
# than the rules that run. So a rule is first gated by a test that is cheaper still, and shared:
# - "mixed" rules (their secret is 12+ characters from a class of letters and digits, with no
#   whitespace) need a whitespace-free run at least that long with a letter next to a digit; a
#   regex that skips from digit to digit finds those runs, and ordinary prose has none;
# - the others need one character of a small set (`_` for `react_app_…`, `<` for `<add key=`):
#   a single-character test (a memchr) each, shared by every rule that names that character.
# Only then are the remaining rules' keywords tested: each keyword once per text, shorter ones
# first (one found absent rules out the longer ones that hold it), the second keyword sets only
# for rules whose first set was found; the plan of tests is worked out once per set of rules
# left (`_keyword_plan`). Which rules run changes nothing in what they find: each gate is
# implied by the rule.

_MIXED_AT = re.compile(r"[0-9](?:(?<=[A-Za-z][0-9])|(?=[A-Za-z]))")


_MIXED_LOOKS = 64  # runs looked at before taking every mixed rule as possible


def _mixed_run(text: str) -> int:
    """The length of the longest whitespace-free run of `text` that holds a letter next to a
    digit (0 if there is none). A text with more such runs than `_MIXED_LOOKS` (code, hostile
    input) gets every mixed rule: a bound on this test's work, not on what is found."""
    best, pos, n = 0, 0, len(text)
    for _ in range(_MIXED_LOOKS):
        if pos >= n:
            return best
        m = _MIXED_AT.search(text, pos)
        if m is None:
            return best
        at = m.start()
        start = max(text.rfind(" ", 0, at), text.rfind("\n", 0, at), text.rfind("\t", 0, at)) + 1
        end = n
        for ws in " \n\t":
            e = text.find(ws, at)
            if 0 <= e < end:
                end = e
        best = max(best, end - start)
        pos = end + 1
    return n


# Gates of the hand-written rules (the data rules carry theirs, worked out from their patterns
# by scripts/build_secret_rules.py): each is implied by the rule's pattern, as above ("digit":
# the secret holds a digit; for OpenAI's and Anthropic's keys, whose pattern does not require
# one, every key issued does: "T3BlbkFJ", "api03"). AWS key ids are gated by one
# case-sensitive test, a capital A (every prefix starts with one), cheaper than five prefixes.
_HAND_GATES: dict[str, dict] = {
    "private-key-block": {"chars": "-"},
    "github-token": {"chars": "_"},
    "github-fine-grained-pat": {"chars": "_"},
    "stripe-key": {"chars": "_"},
    "huggingface-token": {"chars": "_"},
    "npm-token": {"chars": "_"},
    "slack-webhook-url": {"chars": "/"},
    "google-api-key": {"chars": "z"},
    "jwt": {"chars": "j"},
    "azure-devops-pat": {"chars": "j", "chars2": "q", "digit": True},
    "kerberos-hash": {"chars": "$"},
    "aws-secret-access-key": {"mixed": 40},
    "gitlab-token": {"chars": "-"},
    "slack-token": {"chars": "-", "chars2": "x", "digit": True},
    "anthropic-api-key": {"chars": "-", "digit": True},
    "openai-api-key": {"chars": "-", "digit": True},
    "pypi-token": {"chars": "-", "digit": True},
    "sendgrid-api-key": {"mixed": 69},
    "twilio-api-key": {"mixed": 34},
    "url-credentials": {"chars": "@", "chars2": "/"},
    "credential-assignment": {"chars": ":=!"},
}
_CASED_GATES = {"aws-access-key-id": ("\0A",)}  # already in the plan's form


def _plan():
    rules = SECRET_RULES
    gates = [_HAND_GATES.get(r.id, {}) for r in HAND_RULES] + [
        {"mixed": g["min_secret"]} if g["mixed"] else g for g in _DATA_GATES]
    first = second = 0  # rules whose first (second) gate is empty
    by_char: dict[str, list[int]] = {}
    mixed: dict[int, int] = {}
    digit = 0
    for i, g in enumerate(gates):
        bit = 1 << i
        if g.get("mixed"):
            mixed[g["mixed"]] = mixed.get(g["mixed"], 0) | bit
            second |= bit
            continue
        if g.get("digit"):
            digit |= bit
        for n, key in ((0, "chars"), (1, "chars2")):
            chars = g.get(key, "")
            if not chars:
                if n == 0:
                    first |= bit
                else:
                    second |= bit
            for c in chars:
                by_char.setdefault(c, [0, 0])[n] |= bit
    mixed_steps, acc = [], 0
    for need in sorted(mixed):
        acc |= mixed[need]
        mixed_steps.append((need, acc))
    keywords = tuple(r.keywords for r in rules)
    cased = tuple(False for _ in HAND_RULES) + tuple(g["case"] for g in _DATA_GATES)
    # a case-sensitive keyword is looked up in the text itself, under a key of its own
    keywords = tuple(_CASED_GATES.get(r.id) or (tuple("\0" + kw for kw in kws) if c else kws)
                     for r, kws, c in zip(rules, keywords, cased))
    also = tuple(() for _ in HAND_RULES) + tuple(g["and"] for g in _DATA_GATES)
    every = sorted({kw for kws in keywords + also for kw in kws}, key=len)
    # the hand rules' keywords are tested first: a data keyword holding one known absent is too
    shorter = sorted({kw for kws in keywords[:len(HAND_RULES)] for kw in kws if kw[0] != "\0"} | set(_FAMILIES))
    inside = {kw: () if kw[0] == "\0" else tuple(k for k in shorter if len(k) < len(kw) and k in kw)
              for kw in every}
    return (first, second, digit, tuple((c, a, b) for c, (a, b) in sorted(by_char.items())),
            tuple(reversed(mixed_steps)),
            tuple(tuple(k for k in pair if k) for pair in zip(keywords, also)), inside)


# Keywords of the hand rules that many data rules' keywords contain ("password", "db_passw",
# "secret:"): tested first, one found absent rules out all those rules' keywords untested.
_FAMILIES = ("pass", "secret", "pwd", "token", "key")
(_FIRST, _SECOND, _NEEDS_DIGIT, _BY_CHAR, _MIXED_STEPS, _KEYWORDS, _INSIDE) = _plan()



# Mixed rules without keywords whose pattern needs a punctuation character (tests/test_secret_rules.py
# checks the list against rules.json): on a text with many letters-and-digits runs (code, hostile
# input) they would otherwise all run.
_MIXED_NEEDS_CHAR = {"noseyparker:np.kubernetes.1": ".", "detect-secrets:DiscordBotTokenDetector.1": ".",
                     "detect-secrets:TelegramBotTokenDetector.1": ":"}
# ... and the one whose token starts with 8 digits in a row (a bot id): tested by one C-level
# translate of the text's bytes, not its pattern run over all of it.
_DIGIT_RUN_BITS = sum(1 << i for i, r in enumerate(SECRET_RULES) if r.id == "detect-secrets:TelegramBotTokenDetector.1")
_DIGIT_BYTES = bytes(ord("x") if 48 <= b <= 57 else ord(" ") for b in range(256))


_EIGHT_DIGITS = re.compile(r"\d{8}")


def _digit_run(text: str) -> bool:
    """Whether `text` has 8 digits in a row (`\\d`, as the pattern has it: any script's
    digits, so a text that is not ASCII is searched)."""
    if text.isascii():
        return b"xxxxxxxx" in text.encode("ascii").translate(_DIGIT_BYTES)
    return _EIGHT_DIGITS.search(text) is not None


_MIXED_NEEDS = tuple((c, sum(1 << i for i, r in enumerate(SECRET_RULES) if _MIXED_NEEDS_CHAR.get(r.id) == c))
                     for c in sorted(set(_MIXED_NEEDS_CHAR.values())))
_PLANS: dict[int, tuple] = {}
_PLAN_LIMIT = 1024  # sets of gated rules whose keyword plans are kept


def _keyword_plan(chosen: int) -> tuple:
    """The keyword tests for the rules in `chosen`, in two steps: the keywords of the rules'
    first sets, then those of their second sets (only for the rules still in). Each keyword is
    tested once, shorter ones first: a keyword that holds one found absent is absent too (the
    hand rules' keywords such as "pass" rule out "db_passw" untested). A test carries the
    rules it lets through."""
    needs = [0, 0]
    enables: list[dict[str, int]] = [{}, {}]
    bits = chosen
    while bits:
        bit = bits & -bits
        bits ^= bit
        for n, kws in enumerate(_KEYWORDS[bit.bit_length() - 1]):
            needs[n] |= bit
            for kw in kws:
                enables[n][kw] = enables[n].get(kw, 0) | bit
    at: dict[str, int] = {}
    steps = []
    for n in (0, 1):
        every = {kw for kw in enables[n] if kw not in at}
        for kw in enables[n]:
            every.update(k for k in _INSIDE.get(kw, ()) if k not in at)
        tests = []
        for kw in sorted(every, key=lambda k: (len(k), k)):
            tests.append((kw[1:] if kw[0] == "\0" else kw, kw[0] == "\0", unspaced(kw),
                          tuple(at[k] for k in _INSIDE.get(kw, ())), enables[n].get(kw, 0)))
            at[kw] = len(at)
        # a keyword tested in the first step and also in a second set: its hit counts there too
        again = tuple((at[kw], b) for kw, b in enables[n].items() if kw not in every)
        steps.append((tuple(tests), again, needs[n]))
    if len(_PLANS) >= _PLAN_LIMIT:
        _PLANS.clear()
    plan = _PLANS[chosen] = tuple(steps)
    return plan


def find_secrets(text: str, low: str | None, folded: str) -> list[Finding]:
    """Every secret rule on one text (`low`/`folded` as `scan` makes them), in priority order;
    a finding overlapping an earlier one is dropped. The same as running `SECRET_RULES` one by
    one (as `scanner._run` does), with most rules skipped by the gates above."""
    # a long text: characters and keywords without whitespace are looked up among its distinct
    # pieces (hostile text repeats its pieces; hundreds of scans of all of it cost more)
    hay = pieces(folded) if len(folded) > LONG_TEXT else folded
    first, second = _FIRST, _SECOND
    for c, a, b in _BY_CHAR:
        if c in hay:
            first |= a
            second |= b
    chosen = first & second
    if holds_any(hay, DIGITS):
        longest = _mixed_run(text)
        for need, bits in _MIXED_STEPS:
            if need <= longest:
                chosen |= bits
                break
        for c, bits in _MIXED_NEEDS:
            if chosen & bits and c not in hay:
                chosen &= ~bits
        if chosen & _DIGIT_RUN_BITS and not _digit_run(text):
            chosen &= ~_DIGIT_RUN_BITS
    else:
        chosen &= ~_NEEDS_DIGIT

    plan = _PLANS.get(chosen)
    if plan is None:
        plan = _keyword_plan(chosen)
    hits: list[bool] = []
    for tests, again, need in plan:
        if not need & chosen:
            continue
        got = 0
        for kw, cased, bare, inside, enabled in tests:
            for k in inside:  # a shorter keyword in it, found absent
                if not hits[k]:
                    hits.append(False)
                    break
            else:
                hit = kw in (text if cased else hay if bare else folded)
                hits.append(hit)
                if hit:
                    got |= enabled
        for k, enabled in again:
            if hits[k]:
                got |= enabled
        chosen &= ~(need & ~got)
    kept: list[Finding] = []
    starts: list[int] = []
    ends: list[int] = []
    rules = SECRET_RULES
    while chosen:
        bit = chosen & -chosen
        chosen ^= bit
        i = bit.bit_length() - 1
        rule = rules[i]
        count = 0
        for start, end in rule.find(text, low):
            j = bisect.bisect_left(starts, end)
            if end <= start or (j and ends[j - 1] > start):
                continue
            starts.insert(j, start)
            ends.insert(j, end)
            kept.append(Finding(rule.kind, rule.id, rule.description, start, end))
            count += 1
            if count == _MAX_FINDINGS:
                break
    return kept
