#!/usr/bin/env python3
"""Build the scanner's data-driven secret rules from two maintained rule sets.

    python scripts/build_secret_rules.py \\
        --noseyparker DIR   # Nosey Parker's crates/noseyparker/data/default/builtin/rules/ (*.yml)
        --gitleaks FILE     # gitleaks' config/gitleaks.toml
        [--sources FILE]    # JSON {"noseyparker": {"repo", "commit", "files": {name: commit}},
                            #       "gitleaks": {"repo", "commit"}}: where the inputs were read
        [--out runtime/soulgraph/memory/scanner/secret_rules/rules.json]

Writes one JSON file the scanner loads at import (json only: the runtime needs neither
pyyaml nor a TOML reader). Every rule keeps its upstream id (``noseyparker:np.github.1``,
``gitleaks:github-pat``), its pattern converted to Python ``re`` syntax, and what the scanner
needs to run it cheaply: literal keywords (gitleaks' own; derived from the pattern's literals
for Nosey Parker), the literals a match starts with (so a rule runs only where one occurs), the
capture group that is the secret, the secret's minimum length and whether it can hold
whitespace, gitleaks' entropy floor and per-rule allowlists. The rule sets' own examples are
not copied: they are real-looking strings, and the tests make their own.

Conversion (Go RE2 / Rust regex -> Python re):
- ``(?x)`` verbose patterns are compacted (whitespace and ``#`` comments dropped, in character
  classes too, as Rust's verbose mode does), ``(?#...)`` comments removed;
- inline flags that are not at the start, ``(?i)`` after text or ``(?s)`` inside a group, become
  a scoped group ``(?i:...)`` to the end of the enclosing group (Go and Rust apply them there;
  Python refuses them);
- ``\\z`` becomes ``\\Z``; a pattern anchored as a whole line (``^...$`` with no ``(?m)``)
  is anchored at word boundaries instead, since a memory is prose, not a file;
- gitleaks' leading ``[\\w.-]{0,50}?`` (it only widens a match to the left; the secret's span
  is the same) is dropped, so the pattern starts at its keyword and cannot rescan itself.

Rules left out (listed in the JSON's ``skipped`` with the reason): Nosey Parker rules for
identifiers rather than secrets (its ``identifier`` category: client ids, buckets, account
ids, public keys, user names); gitleaks rules with no pattern (file names only) and
``generic-api-key`` (the scanner's own ``credential-assignment`` covers assignments, with its
placeholder judgment).
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import re
import sys
import tomllib
import warnings

try:
    import re._parser as sre_parse  # Python 3.11+
    from re._constants import (ANY, AT, BRANCH, CATEGORY, IN, LITERAL, MAX_REPEAT, MIN_REPEAT,
                               NEGATE, NOT_LITERAL, RANGE, SUBPATTERN, ASSERT, ASSERT_NOT,
                               CATEGORY_SPACE, CATEGORY_NOT_WORD, CATEGORY_NOT_DIGIT,
                               POSSESSIVE_REPEAT, ATOMIC_GROUP)
except ImportError:  # pragma: no cover
    sys.exit("Python 3.11 or newer is needed")

import yaml

OUT = os.path.join(os.path.dirname(__file__), os.pardir, "runtime", "soulgraph", "memory",
                   "scanner", "secret_rules", "rules.json")

# Nosey Parker rules that name an identifier, not a credential, where the file read carries no
# categories (older versions); the rest are recognised by their `identifier` category.
NP_IDENTIFIERS = {
    "np.age.1": "age recipient: a public key",
    "np.aws.3": "AWS account id",
    "np.mapbox.1": "Mapbox public token (pk.), read-only and meant to be shipped",
    "np.twitter.1": "Twitter client id",
}
NP_SKIP = {
    "np.pem.1": "covered by the scanner's own private-key-block rule",
}
DS_SKIP = {
    "IbmCloudIamDetector.1": "its provider name is optional: any `key = <44 characters>`, an "
                             "assignment the scanner's credential-assignment rule judges",
    "SoftlayerDetector.1": "its provider name is optional (as IbmCloudIamDetector.1's)",
    "CloudantDetector.1": "its provider name may be `cl` alone (`cl_key = …`): an assignment "
                          "the scanner's credential-assignment rule judges; the URL forms are kept",
    "CloudantDetector.2": "as CloudantDetector.1",
}
# detect-secrets plugins whose patterns are taken (the others: KeywordDetector and the entropy
# detectors have none; IPPublicDetector finds no secret; PrivateKeyDetector fires on a header
# alone and BasicAuthDetector on `user:password@` placeholders, both judged by the scanner's own
# rules; JwtTokenDetector's pattern needs its JSON check, which the scanner's jwt rule makes;
# TwilioKeyDetector's `AC…` is an account id).
DS_PLUGINS = ("ArtifactoryDetector", "AWSKeyDetector", "AzureStorageKeyDetector",
              "CloudantDetector", "DiscordBotTokenDetector", "GitHubTokenDetector",
              "GitLabTokenDetector", "IbmCloudIamDetector", "IbmCosHmacDetector",
              "MailchimpDetector", "NpmDetector", "OpenAIDetector", "PypiTokenDetector",
              "SendGridDetector", "SlackDetector", "SoftlayerDetector", "SquareOAuthDetector",
              "StripeDetector", "TelegramBotTokenDetector")
# gitleaks' token terminator. A memory is prose: a token may end a sentence, so a closing
# punctuation mark before whitespace or the end ends it too.
GL_END = r"""(?:[\x60'"\s;]|\\[nr]|$)"""
GL_END_PROSE = r"""(?:[\x60'"\s;]|\\[nr]|$|[.,!?:)\]}>](?=\s|$))"""
# Python's `re` backtracks where Rust's and Go's engines do not: a repeat of a group that
# itself repeats (`(?:\s*//.*)*`) can take exponential time on a near miss. These rewrites keep
# what the patterns match (each skipped line is consumed by exactly one iteration).
PATCHES = {
    "noseyparker:np.gradle.1": [(r"(?:\s*//.*)*", r"(?:\s*+//[^\n]*+)*+")],
    "noseyparker:np.phpmailer.1": [(r"(?:\s*.*\s*){0,3}", r"(?:[^\n]*\n){0,3}?\s*")],
    # a curl command's options within 500 characters a line, as they are
    "gitleaks:curl-auth-header": [(r"(?:.*?|.*?(?:[\r\n]{1,2}.*?){1,5})",
                                   r"(?:[^\r\n]{0,500}?(?:[\r\n]{1,2}[^\r\n]{0,500}?){0,5}?)")],
    "gitleaks:curl-auth-user": [(r"(?:.*|.*(?:[\r\n]{1,2}.*){1,5})",
                                 r"(?:[^\r\n]{0,500}?(?:[\r\n]{1,2}[^\r\n]{0,500}?){0,5}?)")],
    "detect-secrets:NpmDetector.1": [(r"\/\/.+\/:_authToken=", r"\/\/.{1,500}?\/:_authToken="),
                                     (r")).*", r"))")],
    "detect-secrets:OpenAIDetector.1": [(r"sk-[A-Za-z0-9-_]*", r"sk-[A-Za-z0-9-_]{0,200}")],
}
DS_END = r"""(?:\s|"|$)"""  # detect-secrets' Artifactory terminator, likewise
DS_END_PROSE = r"""(?:\s|"|$|[.,!?:)\]}>](?=\s|$))"""
# The secret of a multi-group Nosey Parker rule is its last group unless named here.
NP_SECRET_GROUP = {"np.mongodb.1": 2, "np.postgres.1": 2}
GL_SKIP = {
    "generic-api-key": "covered by the scanner's own credential-assignment rule",
    "private-key": "covered by the scanner's own private-key-block rule (which also takes a "
                   "truncated key; this pattern's lazy scan to the next KEY----- is slow on long text)",
    "kubernetes-secret-yaml": "a YAML file's structure (kind: Secret ... data:), not a value in prose",
}
SEMI_PREFIX = r"[\w.-]{0,50}?"


# -- pattern conversion --------------------------------------------------------------------------

def _strip_verbose(p: str) -> str:
    out, i, in_class = [], 0, False
    while i < len(p):
        c = p[i]
        if c == "\\" and i + 1 < len(p):
            out.append(p[i:i + 2])
            i += 2
            continue
        if in_class:
            if c == "]" and not (out and out[-1] in ("[", "[^")):
                in_class = False
            if c not in " \t\n\r\f\v":
                out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            if p.startswith("[^", i):
                out.append("[^")
                i += 2
            else:
                out.append("[")
                i += 1
            if i < len(p) and p[i] == "]":  # a leading ] is literal
                out.append("]")
                i += 1
            continue
        if c in " \t\n\r\f\v":
            i += 1
            continue
        if c == "#":
            nl = p.find("\n", i)
            i = len(p) if nl < 0 else nl + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


_COMMENT = re.compile(r"\(\?#[^)]*\)")
_LEADING_FLAGS = re.compile(r"\A(?:\(\?([a-zA-Z]+)\))+")
_FLAG_GROUP = re.compile(r"\(\?([a-zA-Z]+)\)")


def _leading_flags(p: str) -> tuple[set[str], str]:
    flags: set[str] = set()
    while True:
        m = re.match(r"\(\?([a-zA-Z]+)\)", p)
        if not m:
            return flags, p
        flags |= set(m.group(1))
        p = p[m.end():]


def _scope_inline_flags(p: str) -> str:
    """`(?i)` in the middle of a pattern -> `(?i:` ... `)` up to the end of its group."""
    out: list[str] = []
    closers: list[int] = [0]  # per open group: how many scoped groups to close at its end
    active: list[list[str]] = [[]]  # per open group: the flags set inside it so far
    i, in_class = 0, False
    while i < len(p):
        c = p[i]
        if c == "\\" and i + 1 < len(p):
            out.append(p[i:i + 2])
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            j = i + 1
            if j < len(p) and p[j] == "^":
                j += 1
            if j < len(p) and p[j] == "]":
                j += 1
            out.append(p[i:j])
            i = j
            continue
        m = _FLAG_GROUP.match(p, i) if c == "(" else None
        if m:
            out.append(f"(?{m.group(1)}:")
            closers[-1] += 1
            active[-1].append(m.group(1))
            i = m.end()
            continue
        if c == "(":
            closers.append(0)
            active.append([])
            out.append(c)
        elif c == ")":
            out.append(")" * closers.pop())
            active.pop()
            out.append(c)
        elif c == "|" and active[-1]:
            # Go and Rust keep a group's flags across its alternatives: close the scoped
            # groups before the bar and open them again after it
            out.append(")" * closers[-1])
            out.append("|")
            out.extend(f"(?{f}:" for f in active[-1])
            closers[-1] = len(active[-1])
        else:
            out.append(c)
        i += 1
    out.append(")" * closers.pop())
    return "".join(out)


def convert(pattern: str) -> tuple[str, str]:
    """Upstream pattern -> (Python pattern without leading flags, flags such as "is")."""
    p = pattern.strip()
    flags, body = _leading_flags(p)
    if "x" in flags:
        body = _strip_verbose(_COMMENT.sub("", body))
        flags.discard("x")
        more, body = _leading_flags(body)
        flags |= more
    body = _COMMENT.sub("", body)
    body = _scope_inline_flags(body)
    body = body.replace(r"\z", r"\Z")
    if "m" not in flags:
        m = re.fullmatch(r"\(\^(.*)\$\)", body)
        if m:
            body = r"\b(" + m.group(1) + r")\b"
    flags &= set("ims")
    return body, "".join(sorted(flags))


def compile_py(body: str, flags: str) -> re.Pattern[str]:
    f = 0
    for c in flags:
        f |= {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}[c]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return re.compile(body, f)


# -- pattern analysis ------------------------------------------------------------------------------

def _parse(body: str, flags: str):
    return sre_parse.parse(("(?%s)" % flags if flags else "") + body)


def _literal_runs(seq, icase: bool) -> list[list[str]]:
    """Candidate keyword sets every match must contain one of: literal runs of the required
    sequence, and branches whose every alternative has one."""
    cands: list[list[str]] = []
    run: list[str] = [""]

    def flush():
        if run and all(len(s) >= 2 for s in run) and run != [""]:
            cands.append(sorted(set(run)))
        run[:] = [""]

    for op, av in seq:
        if op is LITERAL:
            ch = chr(av).lower() if icase else chr(av)
            run[:] = [s + ch for s in run]
        elif op is IN and _small_literal_set(av) and len(run) * len(_small_literal_set(av)) <= 8:
            chars = _small_literal_set(av)
            run[:] = [s + (c.lower() if icase else c) for s in run for c in chars]
        elif op is SUBPATTERN:
            sub_flags = av[1]
            sub_icase = icase or bool(sub_flags & re.IGNORECASE)
            if av[2] & re.IGNORECASE:
                sub_icase = False
            inner = av[3]
            if all(o is LITERAL for o, _ in inner):
                for o, a in inner:
                    ch = chr(a).lower() if sub_icase else chr(a)
                    run[:] = [s + ch for s in run]
            else:
                flush()
                cands.extend(_literal_runs(inner, sub_icase))
        elif op is BRANCH:
            heads = _branch_prefixes(av, icase)
            if heads and run != [""] and len(run) * len(heads) <= 16:
                run[:] = [s + h for s in run for h in heads]  # `A(?:KIA|SIA)`: sre's factoring
            flush()
            alts = []
            for alt in av[1]:
                best = _best(_literal_runs(alt, icase))
                if best is None:
                    alts = None
                    break
                alts.extend(best)
            if alts:
                cands.append(sorted(set(alts)))
        elif op in (MAX_REPEAT, MIN_REPEAT, POSSESSIVE_REPEAT):
            flush()
            if av[0] >= 1:
                cands.extend(_literal_runs(av[2], icase))
        elif op is AT:
            continue
        else:
            flush()
    flush()
    return cands


def _small_literal_set(av) -> list[str] | None:
    chars = []
    for o, a in av:
        if o is not LITERAL:
            return None
        chars.append(chr(a))
    return chars if 1 <= len(chars) <= 4 else None


def _best(cands: list[list[str]]) -> list[str] | None:
    """The candidate set with the longest shortest keyword (then the fewest keywords)."""
    good = [c for c in cands if c and min(map(len, c)) >= 2]
    if not good:
        return None
    return max(good, key=lambda c: (min(map(len, [k.strip() for k in c])), -len(c)))


def _prefixes(seq, icase: bool) -> list[str] | None:
    """The literals every match starts with (after zero-width assertions), or None."""
    run = [""]
    for op, av in seq:
        if op is AT and not run[0]:
            continue
        if op is LITERAL:
            run = [s + (chr(av).lower() if icase else chr(av)) for s in run]
            continue
        if op is IN and _small_literal_set(av) and len(run) * len(_small_literal_set(av)) <= 8:
            run = [s + (c.lower() if icase else c) for s in run for c in _small_literal_set(av)]
            continue
        if op is SUBPATTERN and not run[0]:
            sub_icase = (icase or bool(av[1] & re.IGNORECASE)) and not (av[2] & re.IGNORECASE)
            inner = _prefixes(av[3], sub_icase)
            return inner
        if op is BRANCH:
            heads = _branch_prefixes(av, icase)
            if not heads:
                break
            return [s + h for s in run for h in heads]
        break
    return run if run[0] else None


def _branch_prefixes(av, icase: bool) -> list[str] | None:
    out: list[str] = []
    for alt in av[1]:
        p = _prefixes(alt, icase)
        if not p:
            return None
        out.extend(p)
    return out


def _element_literals(op, av, icase: bool) -> tuple[list[str], bool] | None:
    """The literal strings one element starts with (a literal run handled by the caller), and
    whether they are case-sensitive."""
    if op is SUBPATTERN:
        sub_icase = (icase or bool(av[1] & re.IGNORECASE)) and not (av[2] & re.IGNORECASE)
        p = _prefixes(list(av[3]), sub_icase)
        return (p, not sub_icase) if p else None
    if op is BRANCH:
        heads = _branch_prefixes(av, icase)
        return (heads, not icase) if heads else None
    return None


def _pivot(tree, icase: bool) -> dict | None:
    """A literal every match holds at a bounded distance from its start: where to try the
    pattern (at each occurrence, each start from `lo` to `hi` characters before it). The
    literal run or branch of literals nearest the start, of 2 or more characters, with
    `hi - lo` at most 8 (24 for a literal of 3 or more)."""
    state = tree.state
    lo = hi = 0
    seq = list(tree)
    i = 0
    while i < len(seq):
        op, av = seq[i]
        if op is LITERAL:
            run = ""
            j = i
            while j < len(seq) and seq[j][0] is LITERAL:
                run += chr(seq[j][1])
                j += 1
            if len(run) >= (2 if hi - lo <= 8 else 3):
                return {"literals": [run.lower() if icase else run], "lo": lo, "hi": hi,
                        "case": not icase}
            width = sre_parse.SubPattern(state, seq[i:j]).getwidth()
        elif op is SUBPATTERN and not _element_literals(op, av, icase):
            sub_icase = (icase or bool(av[1] & re.IGNORECASE)) and not (av[2] & re.IGNORECASE)
            inner = _pivot(sre_parse.SubPattern(state, list(av[3])), sub_icase)
            if inner:
                inner["lo"] += lo
                inner["hi"] += hi
                return inner
            width = sre_parse.SubPattern(state, [seq[i]]).getwidth()
            j = i + 1
        else:
            found = _element_literals(op, av, icase)
            if found and min(map(len, found[0])) >= (2 if hi - lo <= 8 else 3):
                lits, case = found
                return {"literals": sorted({x if case else x.lower() for x in lits}), "lo": lo,
                        "hi": hi, "case": case}
            width = sre_parse.SubPattern(state, [seq[i]]).getwidth()
            j = i + 1
        lo += width[0]
        hi += width[1]
        if hi - lo > 24 or hi > 4096:
            return None
        i = j
    return None


def _find_group(seq, gid):
    for op, av in seq:
        if op is SUBPATTERN:
            if av[0] == gid:
                return av[3]
            r = _find_group(av[3], gid)
            if r is not None:
                return r
        elif op is BRANCH:
            for alt in av[1]:
                r = _find_group(alt, gid)
                if r is not None:
                    return r
        elif op in (MAX_REPEAT, MIN_REPEAT, POSSESSIVE_REPEAT):
            r = _find_group(av[2], gid)
            if r is not None:
                return r
        elif op in (ASSERT, ASSERT_NOT):
            r = _find_group(av[1], gid)
            if r is not None:
                return r
    return None


_WS = (9, 10, 11, 12, 13, 32)


def _may_hold_space(seq) -> bool:
    for op, av in seq:
        if op is LITERAL:
            if av in _WS:
                return True
        elif op in (NOT_LITERAL, ANY):
            return True
        elif op is CATEGORY:
            if av in (CATEGORY_SPACE, CATEGORY_NOT_WORD, CATEGORY_NOT_DIGIT):
                return True
        elif op is IN:
            for o, a in av:
                if o is NEGATE:
                    return True
                if o is LITERAL and a in _WS:
                    return True
                if o is RANGE and any(a[0] <= w <= a[1] for w in _WS):
                    return True
                if o is CATEGORY and a in (CATEGORY_SPACE, CATEGORY_NOT_WORD, CATEGORY_NOT_DIGIT):
                    return True
        elif op is SUBPATTERN:
            if _may_hold_space(av[3]):
                return True
        elif op is BRANCH:
            if any(_may_hold_space(alt) for alt in av[1]):
                return True
        elif op in (MAX_REPEAT, MIN_REPEAT, POSSESSIVE_REPEAT):
            if _may_hold_space(av[2]):
                return True
        elif op is ATOMIC_GROUP:
            if _may_hold_space(av):
                return True
    return False


# How likely a character is to occur somewhere in an ordinary 300-character English note
# (lower-cased): a rough guess, used only to pick the cheapest necessary character test for a
# rule (which rules run, never what they find).
_PRESENCE = dict.fromkeys("etaoinshrdlucmwfgypb .,", 1.0)
_PRESENCE.update({"v": 0.95, "k": 0.9, "x": 0.4, "j": 0.4, "q": 0.3, "z": 0.2, "'": 0.6,
                  "-": 0.3, ":": 0.3, "!": 0.3, "?": 0.3, "\"": 0.1, "(": 0.1, ")": 0.1,
                  "/": 0.05, ";": 0.05, "&": 0.03, "%": 0.02, "+": 0.02, "*": 0.02, "@": 0.02,
                  "$": 0.02, "[": 0.02, "]": 0.02, "_": 0.01, "=": 0.01, "#": 0.01, "<": 0.01,
                  ">": 0.01, "{": 0.005, "}": 0.005, "|": 0.005, "~": 0.005, "\\": 0.005,
                  "^": 0.005, "`": 0.005})
_PRESENCE.update(dict.fromkeys("0123456789", 0.3))


def _cost(chars) -> float:
    return min(1.0, sum(_PRESENCE.get(c, 0.05) for c in chars))


def _required_chars(seq, icase: bool) -> list[frozenset[str]]:
    """Sets of characters of which every match holds at least one (one set per required
    element: a literal, a small class, a branch of such)."""
    out: list[frozenset[str]] = []
    for op, av in seq:
        if op is LITERAL:
            out.append(frozenset(chr(av).lower()))
        elif op is IN and _small_literal_set(av):
            out.append(frozenset(c.lower() for c in _small_literal_set(av)))
        elif op is SUBPATTERN:
            out.extend(_required_chars(av[3], icase))
        elif op in (MAX_REPEAT, MIN_REPEAT, POSSESSIVE_REPEAT) and av[0] >= 1:
            out.extend(_required_chars(av[2], icase))
        elif op is BRANCH:
            union: set[str] = set()
            for alt in av[1]:
                sets = _required_chars(alt, icase)
                if not sets:
                    union = set()
                    break
                union |= min(sets, key=_cost)
            if union:
                out.append(frozenset(union))
    return out


def _mixed(seq) -> bool:
    """Whether the secret holds a run of 12 or more characters drawn from a class with both
    letters and digits (so a real one has a letter next to a digit, bar a 1-in-100 draw)."""
    for op, av in seq:
        if op in (MAX_REPEAT, MIN_REPEAT, POSSESSIVE_REPEAT):
            inner = list(av[2])
            if av[0] >= 12 and len(inner) == 1 and inner[0][0] is IN:
                letters = digits = False
                for o, a in inner[0][1]:
                    if o is NEGATE:
                        letters = digits = False
                        break
                    if o is LITERAL:
                        letters = letters or chr(a).isalpha()
                        digits = digits or chr(a).isdigit()
                    elif o is RANGE:
                        lo, hi = a
                        letters = letters or (lo <= ord("z") and hi >= ord("a")) or (
                            lo <= ord("Z") and hi >= ord("A"))
                        digits = digits or (lo <= ord("9") and hi >= ord("0"))
                    elif o is CATEGORY and a == re._constants.CATEGORY_WORD:
                        letters = digits = True
                    elif o is CATEGORY and a == re._constants.CATEGORY_DIGIT:
                        digits = True
                if letters and digits:
                    return True
            if av[0] >= 1 and _mixed(inner):
                return True
        elif op is SUBPATTERN and _mixed(av[3]):
            return True
        elif op is BRANCH and all(_mixed(alt) for alt in av[1]):
            return True
    return False


def _digit_class(av) -> bool:
    """Whether a character class holds digits only."""
    for o, a in av:
        if o is LITERAL and not chr(a).isdigit():
            return False
        if o is RANGE and not (ord("0") <= a[0] and a[1] <= ord("9")):
            return False
        if o is CATEGORY and a != re._constants.CATEGORY_DIGIT:
            return False
        if o not in (LITERAL, RANGE, CATEGORY):
            return False
    return True


def _needs_digit(seq) -> bool:
    """Whether every match holds a digit: a required literal digit or a required digit class."""
    for op, av in seq:
        if op is LITERAL and chr(av).isdigit():
            return True
        if op is IN and _digit_class(av):
            return True
        if op is CATEGORY and av == re._constants.CATEGORY_DIGIT:
            return True
        if op is SUBPATTERN and _needs_digit(av[3]):
            return True
        if op in (MAX_REPEAT, MIN_REPEAT, POSSESSIVE_REPEAT) and av[0] >= 1 and _needs_digit(av[2]):
            return True
        if op is BRANCH and all(_needs_digit(alt) for alt in av[1]):
            return True
    return False


def analyse(body: str, flags: str, groups: list[int]) -> dict:
    tree = _parse(body, flags)
    icase = "i" in flags
    cands = _literal_runs(list(tree), icase)
    best = _best(cands)
    rest = [c for c in cands if c != best and not set(c) & set(best or [])]
    second = _best(rest) if best else None
    prefixes = _prefixes(list(tree), icase)
    pivot = _pivot(tree, icase)
    widths, spaces, mixed = [], False, True
    for g in groups or [0]:
        sub = list(tree) if g == 0 else _find_group(list(tree), g)
        if sub is None:
            raise ValueError(f"group {g} not found")
        sp = sre_parse.SubPattern(tree.state, sub)
        widths.append(sp.getwidth()[0])
        spaces = spaces or _may_hold_space(sub)
        mixed = mixed and _mixed(sub)
    req = sorted({r for r in _required_chars(list(tree), icase) if _cost(r) < 0.9}, key=_cost)
    gate = req[0] if req else frozenset()
    gate2 = req[1] if len(req) > 1 else frozenset()
    lo, hi = tree.getwidth()
    return {"literals": best or [], "literals2": second or [], "pivot": pivot,
            "prefixes": sorted(set(prefixes)) if prefixes else [],
            "min_secret": min(widths), "secret_spaces": spaces,
            "mixed": mixed and not spaces and min(widths) >= 12,
            "gate_chars": "".join(sorted(gate)),
            "gate_chars2": "".join(sorted(gate2)),
            "needs_digit": _needs_digit(list(tree)),
            "max_width": hi if hi < 10**6 else None}


# -- the rule sets ---------------------------------------------------------------------------------

def noseyparker_rules(folder: str):
    for path in sorted(glob.glob(os.path.join(folder, "*.yml"))):
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f) or {}
        for r in doc.get("rules") or []:
            yield os.path.basename(path), r


def build(np_dir: str, gl_file: str, sources: dict, ds: bool = False) -> dict:
    rules, skipped = [], []

    known: set[str] = set()
    known_lengths: set[int] = set()

    def add(rule_id, name, source, pattern, *, keywords=None, secret_group=None, entropy=None,
            allow=(), stopwords=(), strip_prefix=False, python_flags=None):
        if python_flags is None:
            body, flags = convert(pattern)
        else:
            body, flags = pattern, python_flags
        if source == "gitleaks":
            body = body.replace(GL_END, GL_END_PROSE)
        elif source == "detect-secrets":
            body = body.replace(DS_END, DS_END_PROSE)
        for before, after in PATCHES.get(rule_id, ()):
            if before not in body:
                raise SystemExit(f"{rule_id}: the patch for Python's engine no longer applies")
            body = body.replace(before, after)
        if strip_prefix:
            if body.startswith(SEMI_PREFIX):
                body = body[len(SEMI_PREFIX):]
            body = body.replace("(?i:" + SEMI_PREFIX, "(?i:", 1)
        try:
            compiled = compile_py(body, flags)
        except (re.error, Warning) as e:
            skipped.append({"id": rule_id, "reason": f"pattern does not convert: {e}"})
            return
        n = compiled.groups
        if secret_group:
            groups = [secret_group]
        elif n == 0 or len(compiled.groupindex) == n:
            groups = []  # no group, or only named ones that tag a part (jwt-base64): the match
        elif source == "noseyparker":
            groups = [NP_SECRET_GROUP.get(rule_id.split(":", 1)[1], n)]
        else:
            groups = list(range(1, n + 1))  # gitleaks: the first group that matched
        info = analyse(body, flags, groups)
        # gitleaks' keywords are matched in lower case; literals of a case-sensitive pattern
        # keep their case (`AP` is much rarer in prose than `ap`)
        case = not keywords and info["literals"] != [k.lower() for k in info["literals"]]
        case2 = info["literals2"] != [k.lower() for k in info["literals2"]]
        kws = sorted({k.lower() for k in keywords}) if keywords else sorted(
            {k if case else k.lower() for k in info["literals"]})
        rules.append({
            "id": rule_id, "name": name, "source": source, "pattern": body, "flags": flags,
            "groups": groups, "first_group": source in ("gitleaks", "detect-secrets") and not secret_group,
            "keywords": kws, "keywords_case": case,
            # a second set of literals a match also holds (curl's `-H` as well as `curl`)
            "keywords2": sorted({k if case2 else k.lower() for k in info["literals2"]})
            if len(min(info["literals2"], key=len, default="")) >= 2 else [],
            "keywords2_case": case2, "prefixes": info["prefixes"], "pivot": info["pivot"],
            "min_secret": info["min_secret"], "secret_spaces": info["secret_spaces"],
            "mixed": info["mixed"], "gate_chars": info["gate_chars"],
            "gate_chars2": info["gate_chars2"], "needs_digit": info["needs_digit"],
            "entropy": entropy, "allow": list(allow), "stopwords": [s.lower() for s in stopwords],
        })

    for fname, r in noseyparker_rules(np_dir):
        rid = r["id"]
        cats = r.get("categories") or r.get("catgegories") or []
        if rid in NP_SKIP:
            skipped.append({"id": f"noseyparker:{rid}", "reason": NP_SKIP[rid]})
            continue
        if "identifier" in cats or rid in NP_IDENTIFIERS:
            skipped.append({"id": f"noseyparker:{rid}",
                            "reason": NP_IDENTIFIERS.get(rid, "an identifier, not a secret")})
            continue
        add(f"noseyparker:{rid}", r["name"], "noseyparker", r["pattern"])

    with open(gl_file, "rb") as f:
        gl = tomllib.load(f)
    for r in gl.get("rules", []):
        rid = r["id"]
        if rid in GL_SKIP:
            skipped.append({"id": f"gitleaks:{rid}", "reason": GL_SKIP[rid]})
            continue
        if not r.get("regex"):
            skipped.append({"id": f"gitleaks:{rid}", "reason": "no pattern (file names only)"})
            continue
        allow, stop = [], []
        for a in r.get("allowlists", []) or []:
            if a.get("regexTarget", "secret") == "secret":
                allow.extend(a.get("regexes", []))
            stop.extend(a.get("stopwords", []))
        allow_py = []
        for a in [a for a in allow if _literal(a)]:
            known.add(_digest(a))  # a documented example value: kept as its digest only
            known_lengths.add(len(a))
        for a in [a for a in allow if not _literal(a)]:
            body, flags = convert(a)
            allow_py.append(("(?%s)" % flags if flags else "") + body)
        name = rid.replace("-", " ")
        add(f"gitleaks:{rid}", name, "gitleaks", r["regex"], keywords=r.get("keywords"),
            secret_group=r.get("secretGroup"), entropy=r.get("entropy"), allow=allow_py,
            stopwords=stop, strip_prefix=True)

    for w in (gl.get("allowlist") or {}).get("stopwords", []):
        if len(w) >= 16 and re.fullmatch(r"[0-9a-fA-F-]+", w):
            known.add(_digest(w))
            known_lengths.add(len(w))

    if ds:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        plugins = {cls.__name__: cls for cls in get_mapping_from_secret_type_to_class().values()}
        for name in DS_PLUGINS:
            cls = plugins[name]
            for n, regex in enumerate(cls.denylist, 1):
                if f"{name}.{n}" in DS_SKIP:
                    skipped.append({"id": f"detect-secrets:{name}.{n}",
                                    "reason": DS_SKIP[f"{name}.{n}"]})
                    continue
                flags = "".join(c for c, f in (("i", re.IGNORECASE), ("m", re.MULTILINE),
                                               ("s", re.DOTALL), ("x", re.VERBOSE))
                                if regex.flags & f)
                add(f"detect-secrets:{name}.{n}", cls.secret_type, "detect-secrets",
                    regex.pattern, python_flags=flags)

    return {"format": 1, "sources": sources, "known_values_sha256": sorted(known),
            "known_value_lengths": sorted(known_lengths),
            "rules": rules, "skipped": skipped}


def _literal(pattern: str) -> bool:
    return re.escape(pattern) == pattern or not re.search(r"[\\^$.|?*+()\[\]{}]", pattern)


def _digest(value: str) -> str:
    import hashlib
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--noseyparker", required=True, help="folder of Nosey Parker rule *.yml files")
    ap.add_argument("--gitleaks", required=True, help="gitleaks' config/gitleaks.toml")
    ap.add_argument("--sources", help="JSON naming the repositories and commits read")
    ap.add_argument("--detect-secrets", action="store_true",
                    help="also take detect-secrets' plugin patterns (the package must be "
                         "importable: pip install detect-secrets==1.5.0)")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args(argv)
    sources = {}
    if args.sources:
        with open(args.sources, encoding="utf-8") as f:
            sources = json.load(f)
    data = build(args.noseyparker, args.gitleaks, sources, args.detect_secrets)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, ensure_ascii=False, sort_keys=False)
        f.write("\n")
    print(f"{len(data['rules'])} rules, {len(data['skipped'])} skipped -> {args.out}")
    for s in data["skipped"]:
        print(f"  skipped {s['id']}: {s['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
