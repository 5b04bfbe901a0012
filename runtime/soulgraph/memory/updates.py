"""Updates from conversation: a later sentence that changes a value an earlier memory holds.

"My Zotero library has 45 sources" and, weeks later, "I've added 52 sources to my Zotero
library": the second replaces what the first says about the library, and recall should say
so. No model call: a value is read with rules (an amount of money, a percentage, a date, a
time of day, a number with its unit), its *slot* is the words around it ("sources zotero
library"), and an update is a sentence that

1. says a value changed: an update cue near the value ("now", "new", "increased to",
   "extended", "moved … to", "rescheduled", "reached", "down to", "I've added" …);
2. holds a value of the same type (and for plain numbers the same unit) as a value of an
   earlier memory of the same user, and that value differs;
3. shares the slot: at least `MIN_SHARED` of the words around both values, the unit counted
   once, with at least one of them not a common word of the graph.

Precision matters more than recall (a wrong update hides a true memory), so every test is a
"must" and the candidates are few: the graph's own search for the slot's words, earlier
memories of the same scope only. What happens to the old memory is the writer's choice
(memory/lifecycle.py): a memory that holds one statement (a typed fact) is superseded; a
conversation turn, which holds many, stays and is marked `updated` (its metadata lists what
changed, and by which memory), which recall shows beside it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Callable

from soulgraph.engine.graph import ACTIVE, Node, SoulGraph
from soulgraph.engine.index import STOPWORDS, stem

MIN_SHARED = 2  # slot words both sentences must share
WINDOW = 10  # words each side of a value that make its slot
CANDIDATES = 12  # earlier memories the search brings for one changed value
MAX_SENTENCES = 40  # sentences of a memory read for values

_MONTHS = "jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec"
_VALUE = re.compile(
    r"(?P<money>[$€£]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:k|m|million|billion)\b)?)"
    r"|(?P<percent>\b\d+(?:\.\d+)?\s?%)"
    r"|(?P<date>\b(?:" + _MONTHS + r")[a-z]*\.?\s+\d{1,2}(?:st|nd|rd|th)?\b(?:-\d{1,2}\b)?"
    r"|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b)"
    r"|(?P<time>\b\d{1,2}(?::\d{2})?\s?(?:am|pm)\b)"
    r"|(?P<number>\b\d[\d,]*(?:\.\d+)?(?:-\d+(?:\.\d+)?)?)(?:\s?(?P<unit>[a-z]+))?",
    re.IGNORECASE)
# An update cue is a phrase that ends right before the value and says it is the new one:
# "increased … to", "has now reached", "is now", "the new … of", "from X to". A change by an
# amount ("increased by 25%") says nothing of the value, and a question or a plan ("what if it
# were 90?", "I'm planning to raise it to 20%") is not a change.
_CHANGED = (r"(?:increased|decreased|raised|lowered|reduced|extended|shortened|moved|rescheduled|postponed|"
            r"pushed(?:\s+back)?|adjusted|changed|updated|revised|bumped(?:\s+up)?|dropped|improved|grown|grew|"
            r"rose|risen|fell|fallen|cut|switched|upgraded|downgraded|expanded|boosted|shifted|lifted|"
            r"brought(?:\s+it)?(?:\s+(?:down|up))?|got(?:\s+it)?\s+(?:down|up)|gone\s+(?:up|down))")
_CUE_BEFORE = re.compile(
    r"(?:\b" + _CHANGED + r"\b(?:\s+[\w'-]+){0,8}?\s+(?:to|of)"
    r"|\b(?:moving|increasing|raising|lowering|reducing|extending|shortening|adjusting|changing|updating|"
    r"rescheduling|upgrading|bumping|cutting|adjust|update|change|move|extend|reschedule|push|upgrade|bump)\b"
    r"(?:\s+[\w'-]+){0,8}?\s+to"
    r"|\b(?:upgrade|update|change|increase|reduction|extension)\s+to"
    r"|\b(?:has|have|had|'s|'ve)\s+(?:now\s+|recently\s+|just\s+|finally\s+)?(?:reached|hit|hits|added|completed)"
    r"|\b(?:reached|hit)\b"
    r"|\b(?:is|are|was|were|stands?|sits?)\s+(?:now|currently)(?:\s+at)?"
    r"|\b(?:now|currently)\s+(?:at|reached|stands\s+at|sits\s+at|totals?|averaging|around|about)"
    r"(?:\s+(?:around|about|just))?"
    r"|\bget(?:ting)?\s+it\s+(?:down|up)\s+to(?:\s+just)?"
    r"|\bnew\b(?:\s+[\w'-]+){0,2}?\s+(?:of|is|at|to|:)|\bnew"
    r"|\bfrom\s+(?P<was>\S+(?:\s+[ap]m)?)\s+to)\s*$",
    re.IGNORECASE)
_VERB = re.compile(r"(?:increas|decreas|rais|lower|reduc|extend|shorten|mov|reschedul|postpon|push|adjust|chang|"
                   r"updat|revis|bump|drop|improv|grow|grew|rose|rise|fell|fall|cut|switch|upgrad|downgrad|expand|"
                   r"boost|shift|lift|brought|reach|manag|agree|focus|found|reflect|spent|spend|made|set|keep|kept)")
_LEADING = re.compile(r"[$€£]?\s?[\d,.]*\d%?|\S+")
_TARGET = re.compile(r"\b(?:aim\w*|target\w*|goal\w*|achieve|achieving|hop(?:e|ing)|want|wanting|objective|maintain\w*|"
                     r"(?:i|we|i'm|we're|am|are)\s+(?:\w+\s+)?plan(?:s|ned|ning)?\s+(?:to|for|on)|planning\s+(?:to|for|on)|trying\s+to\s+(?:reach|get|hit)|to\s+reach)\b",
                     re.IGNORECASE)  # "planning for 10", not "my internet plan"
_DELTA = re.compile(r"\s*(?:\w+\s+)?(?:reduction|increase|decrease|improvement|drop|growth|boost|rise|cut|gain|"
                    r"jump|decline)s?\b", re.IGNORECASE)
_ASKING = re.compile(r"\b(?:how|what|why|which|should|would|could|can|is|are|does|do)\b", re.IGNORECASE)
_NEW_TARGET = re.compile(r"\b(?:new|revised|updated)\s+(?:target|goal)\b", re.IGNORECASE)
_FROM = re.compile(r"\bfrom\s+(\S+(?:\s+\w+)?)\s+to\s*$", re.IGNORECASE)  # "from 45% to", "from April 20 to"
_GERUND = re.compile(r"\b\w+ing\b", re.IGNORECASE)
_CODE = re.compile(r"[=`{}<>\[\];]|\w\(|\)\.")
_DATE_CUE = re.compile(r"\b(?:" + _CHANGED + r"|moving|rescheduling|extending|postponing|new|adjust|move|extend|"
                       r"reschedule|push|postpone|change|update)\b", re.IGNORECASE)
# A change said right after the value: "my $200 emergency fund, since I just increased it".
_CUE_AFTER = re.compile(r"[^.!?]{0,160}?\b(?:i|we)(?:'ve|\s+have)?\s+(?:just\s+|recently\s+)?"
                        r"(?:increased|raised|lowered|reduced|changed|updated|extended|adjusted|upgraded|bumped)\s+it\b",
                        re.IGNORECASE)
_NOT_A_CHANGE = re.compile(
    r"\b(?:if|whether|would|could|might|should\s+i|how\s+(?:will|would|can|do)|what\s+(?:if|would)|"
    r"(?:i|we|i'm|we're|am|are)\s+(?:\w+\s+)?plan(?:ning)?\s+to|planning\s+to|thinking\s+(?:of|about)|consider(?:ing)?|want\s+to|going\s+to|hope\s+to|aim(?:ing)?\s+to|"
    r"goal\s+(?:is|of)\s+)\b",
    re.IGNORECASE)
_SENTENCE = re.compile(r"(?:[^.!?\n]|[.!?](?=\S))+(?:[.!?]+|$)")  # "1.2 seconds" is not two sentences
_WORD = re.compile(r"[a-z][a-z'-]*")
# Words that say nothing about which value is meant (besides the index's stopwords).
_GENERIC = frozenset("""
    about after again all also am any around been before being both can could did do does doing
    done each even ever few get gets getting got had having he her here him his how into just
    like lot make making many me more most much my myself need needs no not now off once only
    other our out over own really same she should some such than their them there these they
    those through too under until up very want wants we what when where which while who why
    would you your yours trying try help sure know think going kinda sort way thing things
    currently already still yet well able last next first new recently total per since over
    let let's i'm i've i'd i'll it's that's can't don't won't i’m
    """.split())


@dataclass(frozen=True)
class Value:
    type: str  # money, percent, date, time, number
    text: str  # as written
    norm: str  # for comparing: digits and unit, lower case
    unit: str  # the unit word of a number ("sources"), "" for the other types
    slot: frozenset[str]  # the words around it (stemmed), the unit among them
    cued: bool  # an update cue says it is a new value
    was: str = ""  # the old value the sentence names ("from 15% to 20%"), normalised
    target: bool = False  # a value aimed at ("aiming for 10 books"), not one reached: another slot


@dataclass(frozen=True)
class Update:
    old_id: str
    new_id: str
    old: str  # the old value as written
    new: str
    about: tuple[str, ...]  # the slot words both share, sorted


# Slots with a name: what the user says of themselves, where one value replaces the other
# without any cue ("I live in Berlin now" after "I live in Paris"). The name is the slot, the
# words that find older statements of it are its query.
def _name(n: int) -> str:
    """A capitalised name (case-sensitive inside a case-insensitive pattern), as group value<n>."""
    return rf"(?P<value{n}>(?-i:[A-Z][\w'-]+(?:\s+[A-Z][\w'-]+){{0,3}}))"



_NAMED = (
    ("lives in", "live moved based", re.compile(
        r"\b(?:i|we)\s+(?:now\s+|still\s+)?(?:live|living|reside)\s+in\s+" + _name(1)
        + r"|\b(?:i|we)(?:'ve|\s+have)?\s+(?:just\s+|recently\s+|finally\s+)?(?:moved|relocated)\s+to\s+" + _name(2)
        + r"|\bi(?:'m|\s+am)\s+(?:now\s+)?based\s+in\s+" + _name(3), re.IGNORECASE)),
    ("works at", "work job joined", re.compile(
        r"\bi\s+(?:now\s+|still\s+)?work\s+(?:at|for)\s+" + _name(1)
        + r"|\bi(?:'ve|\s+have)?\s+(?:just\s+|recently\s+)?joined\s+" + _name(2)
        + r"|\bmy\s+new\s+job\s+(?:is\s+)?(?:at|with)\s+" + _name(3), re.IGNORECASE)),
    ("favourite", "favourite favorite", re.compile(
        r"\bmy\s+(?:new\s+)?fav(?:ou)?rite\s+(?P<what>[a-z]+(?:\s+[a-z]+)?)\s+(?:is|are)\s+(?:now\s+)?"
        r"(?P<value1>[\w'-]+(?:\s+[\w'-]+){0,3}?)(?=\s*(?:[,.;!?]|$|\s+(?:now|these\s+days|nowadays|and|but)\b))",
        re.IGNORECASE)),
)


def named(text: str) -> list[Value]:
    """The named slots a text states of its writer (where they live, work, their favourite X)."""
    out = []
    for slot, query, pattern in _NAMED:
        for match in pattern.finditer(text[:20_000]):
            value = next((v for k, v in match.groupdict().items() if k.startswith("value") and v), "").strip()
            if not value or (slot != "favourite" and value.split()[0].lower() in ("the", "a", "my", "our", "an")):
                continue
            what = match.groupdict().get("what") or ""
            key = f"{slot} {what}".strip() if what else slot
            out.append(Value(key, value, value.lower(), "", frozenset(query.split()) | set(what.split()), True))
    return out


def values(text: str) -> list[Value]:
    """Every value of a text, with its slot and whether an update cue is near it."""
    out: list[Value] = named(text)
    for sentence in _SENTENCE.findall(text[:20_000])[:MAX_SENTENCES]:
        if _CODE.search(sentence):
            continue  # code: its numbers are settings and line numbers, not what the user said
        lowered = sentence.lower()
        words = [(m.start(), m.end(), m.group()) for m in _WORD.finditer(lowered)]
        matches = [m for m in _VALUE.finditer(sentence) if not _glued(sentence, m)]
        for position, match in enumerate(matches):
            kind = match.lastgroup if match.lastgroup != "unit" else "number"
            if match.group("number") is not None:
                kind = "number"
            raw = match.group(kind).rstrip(",.")
            unit = ""
            if kind == "number":
                unit = _unit(match.group("unit"))
                if _year(raw) or "." in raw and not unit:
                    continue  # a year or a version is no slot
            start, end = match.start(), match.end()
            if _DELTA.match(sentence, end):
                continue  # "a 35% reduction", "a $500 increase": an amount of change, not a value held
            # A value's words stop at its neighbours: in "35% in stocks and 50% in bonds" the
            # bonds are not the 35%'s.
            previous = position - 1
            while previous >= 0 and re.fullmatch(r"(?:\s*[a-z]+)?\s+to\s+", sentence[matches[previous].end():start],
                                                 re.IGNORECASE):
                previous -= 1  # "from 45% to 35%": the two share their words
            left = matches[previous].end() if previous >= 0 else 0
            right = matches[position + 1].start() if position + 1 < len(matches) else len(sentence)
            before = [w for s, _e, w in words if left <= s < start][-WINDOW:]
            after = [w for s, _e, w in words if end <= s < right][:WINDOW]
            slot = {stem(w) for w in before + after if _content(w) and not _VERB.match(w)}
            if unit:
                slot.add(unit)
            cue = _CUE_BEFORE.search(sentence[max(0, start - 70):start])
            # A plan or a question holds back the change it says, in its own clause only:
            # "considering the growth of commits, which has now reached 165" is a change.
            clause = _clause(sentence, start)
            held_back = bool(_NOT_A_CHANGE.search(clause))
            cued = cue is not None and not held_back
            after_cue = _CUE_AFTER.match(sentence, end, right) if cue is None and kind != "date" else None
            if after_cue is not None:
                cued = not (held_back or _NOT_A_CHANGE.search(after_cue.group()))
                cue = after_cue
            if cued and sentence.rstrip().endswith("?") and _GERUND.search(cue.group()) and _ASKING.search(clause):
                cued = False  # "what about increasing it to 50%?" asks, it does not tell
            if cued and kind == "date" and not _DATE_CUE.search(cue.group()):
                cued = False  # "completed … by June 27" dates an event; a date changes when it is moved
            if cued and "new" in cue.group().lower() and re.search(r"\bNew\s+[A-Z]", cue.group()):
                cued = False  # "New Gary": a name, not a new value
            named_old = _FROM.search(sentence[max(0, start - 40):start]) if cued else None
            was = _was(named_old.group(1), kind) if named_old else ""
            # Aimed at, in its own clause ("trying to reach 100%, and I've reached 65%": the 65%
            # is reached), or named the new target right after ("adjusted to 1,350, my new target").
            target = bool(_TARGET.search(clause) or _NEW_TARGET.search(sentence, end, right))
            out.append(Value(kind, raw, _norm(raw, kind), unit, frozenset(slot), cued, was, target))
    return out


_CLAUSE_END = re.compile(r"[,;:()]|\s(?:-|–|—)\s|\b(?:which|and|but|so|because|since|now\s+that)\b", re.IGNORECASE)


def _clause(sentence: str, start: int) -> str:
    """The words of the clause a value at `start` is in, up to it."""
    ends = [m.end() for m in _CLAUSE_END.finditer(sentence, 0, start)]
    return sentence[ends[-1] if ends else 0:start]


def _was(text: str, kind: str) -> str:
    """The old value a "from … to" names, normalised as a value of `kind` is."""
    held = _VALUE.match(text)
    if held is not None and held.lastgroup == kind:
        return _norm(held.group(kind).rstrip(",."), kind)
    return _norm(_LEADING.match(text).group(), kind)


def _glued(sentence: str, match: re.Match[str]) -> bool:
    """A number that is part of a name: "3-cone drill", "4G", "v2"."""
    before = sentence[match.start() - 1:match.start()] if match.start() else ""
    if match.group("number") is None:
        return before.isalpha()
    after = sentence[match.end("number"):match.end("number") + 3]
    return bool(re.match(r"-[a-z]|[a-z]\b|[a-z]\d", after, re.IGNORECASE) and not re.match(
        r"(?:ms|s|h|k|m|x|gb|mb|kb|tb|km|kg)\b", after, re.IGNORECASE)) or before.isalpha()


def _content(word: str) -> bool:
    return len(word) > 2 and word not in STOPWORDS and word not in _GENERIC


def _unit(word: str | None) -> str:
    if not word:
        return ""
    word = word.lower()
    if word in ("ms", "s", "h", "k", "kb", "mb", "gb", "tb", "x", "km", "kg", "mi", "lbs"):
        return word
    if not _content(word) or word in ("am", "pm", "th", "st", "nd", "rd"):
        return ""
    return stem(word)


def _year(raw: str) -> bool:
    return len(raw) == 4 and raw.isdigit() and 1900 <= int(raw) <= 2100


def _norm(raw: str, kind: str) -> str:
    text = raw.lower().replace(",", "").replace(" ", "")
    if kind == "date":
        text = re.sub(r"(?<=\d)(?:st|nd|rd|th)\b", "", text)
        text = re.sub(r"^([a-z]{3})[a-z]*\.?", r"\1", text)
    return text


def _same_slot(new: Value, old: Value, rare: set[str]) -> tuple[str, ...] | None:
    if new.type != old.type or new.norm == old.norm or (new.was and new.was != old.norm) or new.target != old.target:
        return None
    if new.type == "number" and _family(new.unit) != _family(old.unit) and not (not new.unit and old.unit in new.slot):
        return None  # "reached 165" matches "150 commits" when "commits" is among its slot words
    if new.type.startswith(_NAMED_TYPES):
        return (new.type,)  # a named slot: the name is the match
    if _far_apart(new, old):
        return None  # "rent is $2,400" and "a grocery budget of $50": two quantities, not one changed
    shared = new.slot & old.slot
    if len(shared) < MIN_SHARED or not (shared & rare):
        return None
    return tuple(sorted(shared))


_NAMED_TYPES = tuple(slot for slot, _query, _pattern in _NAMED)
FAR_APART = 10  # a new amount or count more than this many times the old one (or under its tenth)
_AMOUNT = re.compile(r"[$€£]?(\d+(?:\.\d+)?)")


def _far_apart(new: Value, old: Value) -> bool:
    if new.type not in ("money", "number"):
        return False
    a, b = _AMOUNT.fullmatch(new.norm), _AMOUNT.fullmatch(old.norm)  # "$5k", "3-4": not compared
    if a is None or b is None:
        return False
    x, y = float(a.group(1)), float(b.group(1))
    return x > 0 and y > 0 and max(x, y) > FAR_APART * min(x, y)


def find(graph: SoulGraph, node: Node, text: str | None = None, *, scope: str | None = None) -> list[Update]:
    """The earlier memories whose values `node`'s text (or `text`, a part of it) changes.
    Only memories of the same scope, first seen before it, active; one update per old memory
    (its best shared slot)."""
    scope = node.scope if scope is None else scope
    changed = [v for v in values(node.content if text is None else text) if v.cued]
    if not changed:
        return []
    found: dict[str, Update] = {}
    for value in changed:
        query = " ".join(sorted(value.slot))
        rare = {w for w in value.slot if _rare(graph, w)}
        best: list[tuple[int, float, Update]] = []
        for hit in graph.query(query, CANDIDATES, where=lambda n: (n.scope == scope and n.status == ACTIVE
                                                                  and n.seen_at < node.seen_at
                                                                  and n.id != node.id)):
            old = hit.node
            if old.id in found:
                continue
            held_values = values(old.content)
            if any(h.type == value.type and h.norm == value.norm for h in held_values):
                continue  # it already holds the new value: a restatement, not an update
            for held in held_values:
                about = _same_slot(value, held, rare)
                if about is not None:
                    best.append((len(about), old.seen_at, Update(old.id, node.id, held.text, value.text, about)))
                    break
        if value.type.startswith(_NAMED_TYPES):  # the user's own statement of a named slot: every older one
            for _shared, _at, update in best:
                found[update.old_id] = update
        elif best:  # the memory that shares most of the slot (the latest on a tie): one, not every candidate,
            update = max(best, key=lambda b: (b[0], b[1]))[2]
            found[update.old_id] = update
            # and what says the same old value in another form: a turn and the memory drawn from it.
            kin = {*graph.parents.get(update.old_id, ()), *graph.children.get(update.old_id, ())}
            for _shared, _at, other in best:
                if other.old_id in kin and other.old == update.old:
                    found[other.old_id] = other
    return list(found.values())


def _rare(graph: SoulGraph, word: str) -> bool:
    """A word in under a fifth of the graph's memories, or in a few (it tells one slot from another)."""
    held = graph.index.df(word)
    return held <= 3 or held * 5 < len(graph.nodes)


# -- read time: the newer of two values the question asks about, first ---------------------------
#
# A later statement of a value often carries no cue ("I've allocated $4,000 for the filing
# fees" after "$3,500 for the filing fees") and, written alone, cannot be told from a second,
# different quantity, so nothing is superseded for it. At read time the question names the slot:
# among the memories recall shows, one whose value for the question's slot differs from an older
# shown memory's is moved up above it. Nothing is marked or hidden; only the order changes.

# A question word both values' slots must share. One is enough: both memories are already among
# what recall found for the question ("the application deadline being May 10", then "the
# deadline was extended to May 20" share only "deadline" of its words).
MIN_ABOUT = 1
MIN_ASKED = 2  # a question with fewer words that can name a slot names none ("hello")


def question_words(question: str) -> frozenset[str]:
    """The words of a question that can name a slot (stemmed, no common or verb-like words)."""
    return frozenset(stem(w) for w in _WORD.findall(question.lower()) if _content(w) and not _VERB.match(w))


# A value needs a digit, a currency sign or a month: most turns have none, and skip the rules.
_MAYBE_VALUE = re.compile(r"[\d$€£]|\b(?:" + _MONTHS + r")", re.IGNORECASE)


@functools.lru_cache(maxsize=4096)
def _held_values(content: str) -> tuple[Value, ...]:
    """A memory's values, kept for the memories recall shows again and again (a prefetch a turn)."""
    return tuple(values(content)) if _MAYBE_VALUE.search(content) else ()


def _asked_values(node: Node, asked: frozenset[str]) -> list[Value]:
    return [v for v in _held_values(node.content) if len(v.slot & asked) >= MIN_ABOUT]


def _same_unit(a: Value, b: Value) -> bool:
    """The same unit (or of one family: "512MB" and "1GB"), or one named among the other's words:
    "reached 165" and "150 commits", "12 conditional probability problems" and "8 problems"."""
    return (_family(a.unit) == _family(b.unit) or bool(a.unit and a.unit in b.slot)
            or bool(b.unit and b.unit in a.slot))


_FAMILIES = {unit: family for family, units in (("bytes", ("kb", "mb", "gb", "tb")), ("seconds", ("ms", "s")))
             for unit in units}


def _family(unit: str) -> str:
    return _FAMILIES.get(unit, unit)


@dataclass(frozen=True)
class Later:
    """A shown memory holds a newer, different value than an older shown one, for the slot the
    question asks about."""
    older: Node
    newer: Node
    old: Value
    new: Value


def later_values(question: str, nodes: list[Node]) -> list[Later]:
    """Every pair of `nodes` (as recall shows them) where a newer memory holds another value of
    the same kind and unit for what the question asks than an older one (both values' slots
    sharing `MIN_ABOUT` of its words); in the order of `nodes`' newer memory."""
    asked = question_words(question)
    if len(asked) < MIN_ASKED or len(nodes) < 2:
        return []
    held = {node.id: _asked_values(node, asked) for node in nodes}
    found = []
    for node in nodes:
        for value in held[node.id]:
            for other in nodes:
                if other.seen_at >= node.seen_at:
                    continue
                old = next((v for v in held[other.id] if _changes(v, value, asked)), None)
                if old is not None:
                    found.append(Later(other, node, old, value))
    return found


def newer_first(question: str, nodes: list[Node], later: list[Later] | None = None) -> list[Node]:
    """`nodes` in rank order, except that a memory holding a newer value for what the question
    asks than a higher-ranked older memory (`later_values`) is moved up right above it."""
    pairs = later_values(question, nodes) if later is None else later
    older_of: dict[str, list[str]] = {}
    for pair in pairs:
        older_of.setdefault(pair.newer.id, []).append(pair.older.id)
    order = list(nodes)
    for node in nodes:
        olders = set(older_of.get(node.id, ()))
        above = [o for o in order[:order.index(node)] if o.id in olders]
        if above:
            order.remove(node)
            order.insert(order.index(above[0]), node)
    return order


# A newer statement recall did not show. The question's words may match the older wording
# best ("my scheduled safety inspection" and "I've scheduled a safety inspection … on March 23"),
# so the newer value ("a safety inspection coming up on March 25") can rank below what is shown.
# For a shown memory holding a value of what the question asks, the graph's word search for
# that value's slot among later memories finds it. A memory found this way was not among
# recall's answers, so it is held to more than `later_values` holds a shown pair to: a value of
# the kind the question asks for ("when": a date or a time; "how many": a count), and its slot
# holds at least `SLOT_SHARE` of the weight (idf) of the question's words in the older value's.
LOOKUPS = 3  # shown memories whose asked values are searched for, in rank order
LOOKED_AT = CANDIDATES  # later memories one search brings
SLOT_SHARE = 0.5

_ASKED_KIND = (
    (re.compile(r"\bwhen\b|\bwhat\s+(?:date|day|time)\b|\bwhich\s+(?:date|day)\b", re.IGNORECASE), ("date", "time")),
    (re.compile(r"\bhow\s+many\b", re.IGNORECASE), ("number",)),
    (re.compile(r"\bhow\s+much\b", re.IGNORECASE), ("money", "number", "percent")),
    (re.compile(r"\bwhat\s+(?:percentage|percent|share|rate)\b", re.IGNORECASE), ("percent",)),
)


def asked_kinds(question: str) -> tuple[str, ...]:
    """The kinds of value a question asks for, by its question words; () when it does not say."""
    for pattern, kinds in _ASKED_KIND:
        if pattern.search(question):
            return kinds
    return ()


def answers_first(question: str, nodes: list[Node]) -> list[Node]:
    """`nodes` with those holding a value of the kind the question asks for (`asked_kinds`), in
    a slot that shares one of its words, moved above those that hold none; each part keeps its
    rank order. "How many people signed up for the market stall?": the line with "25
    pre-registrations" for the stall stands above the one that only planned it."""
    kinds = asked_kinds(question)
    asked = question_words(question)
    if not kinds or len(asked) < MIN_ASKED:
        return list(nodes)
    holding = [any(v.type in kinds for v in _asked_values(node, asked)) for node in nodes]
    return [n for n, h in zip(nodes, holding) if h] + [n for n, h in zip(nodes, holding) if not h]


def later_statements(graph: SoulGraph, question: str, nodes: list[Node],
                     visible: Callable[[Node], bool]) -> list[Later]:
    """For the first `LOOKUPS` of `nodes` holding a value of the kind and slot the question asks
    about, the best match of a later memory that `visible` accepts, is not among `nodes`, and
    holds another value of that kind for the same slot. One per older memory; in the order of
    `nodes`. A question that names no kind of value (`asked_kinds`) searches for none."""
    kinds = asked_kinds(question)
    asked = question_words(question)
    if not kinds or len(asked) < MIN_ASKED:
        return []
    shown = {node.id for node in nodes}
    taken: set[str] = set()
    found: list[Later] = []
    searched = 0
    for node in nodes:
        olds = [v for v in _asked_values(node, asked) if v.type in kinds]
        if not olds:
            continue
        if searched == LOOKUPS:
            break
        searched += 1
        slot_words = set().union(*(old.slot & asked for old in olds))
        after, scope = node.seen_at, node.scope
        hits = graph.query(" ".join(sorted(slot_words)), LOOKED_AT,
                           where=lambda n: n.seen_at > after and n.scope == scope and n.id not in shown)
        for hit in hits:
            newer = hit.node
            if newer.id in taken or not visible(newer):
                continue
            pair = _newer_value(graph, olds, _asked_values(newer, asked), asked)
            if pair is not None:
                taken.add(newer.id)
                found.append(Later(node, newer, *pair))
                break
    return found


def _newer_value(graph: SoulGraph, olds: list[Value], news: list[Value],
                 asked: frozenset[str]) -> tuple[Value, Value] | None:
    """The first (old, new) of two memories' values that change the same asked slot, the new
    slot holding `SLOT_SHARE` of the old one's asked weight."""
    idf = graph.index.idf
    weights = [sum(idf(w) for w in sorted(old.slot & asked)) for old in olds]
    for value in news:
        for old, weight in zip(olds, weights):
            if (_changes(old, value, asked)
                    and sum(idf(w) for w in sorted(old.slot & value.slot & asked)) >= SLOT_SHARE * weight):
                return old, value
    return None


def _changes(old: Value, new: Value, asked: frozenset[str]) -> bool:
    """Whether `new` is another value than `old` for the same asked slot: the same kind and
    unit, both reached (or both aimed at), and one of the question's words in both slots."""
    return (old.type == new.type and _same_unit(old, new) and old.target == new.target
            and old.norm != new.norm and len(old.slot & new.slot & asked) >= MIN_ABOUT)
