"""Entities: the people, places, organisations, works and other named things memories are about.

"What do we know about Priya?" is answered from the graph's own index, not by word search:

- **Recognising** (`recognise`): rules over the text, no model (docs/decisions/entity-recogniser.md
  has the figures and why no library): capitalised spans ("Priya", "New York", "Lord of the
  Rings"), inner capitals ("LeBron", "McKenzie"), acronyms ("NYC"), quoted titles ("The Alchemist"),
  a title before a name ("Dr. Patel"), the conversation's speakers and the user's own names.
  A capitalised word opening a sentence ("Blue calms me", "Dance is my passion") is a name only
  with evidence: a speaker or known entity, the small gazetteer of countries, states and big
  cities, an inner capital, or the same word capitalised inside a sentence of the same text.
  Greetings and interjections before a name are dropped ("Hey Mel" -> "Mel").
- **Names** (`key`): "Priya", "priya", "Priya's" and "Dr. Priya" are one entity, `priya`; "Priya
  Patel" is `priya-patel`, which `about("Priya")` also reaches (a key's first or last word).
- **Links**: a memory about an entity carries the tag `entity:<key>` (`link_tags`). Tags are the
  graph's own index, so the memories about an entity are one set lookup, and a memory's tags
  live in its scope: another user's memory about Priya is another user's memory, hidden from
  this reader like any other. The names as written and their types go in the memory's metadata
  (`entities`: name -> type), through the write guard like every other string.
- There are no separate entity nodes: an entity is the set of memories tagged with it
  (`known`, `entity_list`), so nothing has to keep entity nodes out of the snapshot, prefetch
  and searches, and an entity needs no write of its own.
- **Recall** (`about`): the memories about an entity the reader sees, typed memories first
  (what consolidation drew from the turns), then turns, newest first within each.
- **Prefetch** (`query_tags`, `boost`): the entities a turn names that this scope already knows;
  memories about them rise in the recall list, and a few more come in.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import AbstractSet, Callable, Container, Iterable

from soulgraph.engine import record
from soulgraph.engine.graph import ACTIVE, Hit, Node, SoulGraph

TAG_PREFIX = "entity:"
METADATA_KEY = "entities"  # a memory's metadata: {name as written: type}
TYPES = ("person", "place", "organisation", "work", "other")
MAX_ENTITIES = 16  # per text: a pasted list of names is not sixteen things a turn is about
MAX_NAME_CHARS = 80
MAX_SPAN_WORDS = 6

# A word of a name: a capital then letters ("Priya", "O'Neil", "Jean-Luc", "McKenzie"), an
# acronym ("NYC"), or a number right after a name word ("Cyberpunk 2077", handled in _spans).
_POSSESSIVE = re.compile(r"(?:['’]s|(?<=s)['’])$", re.IGNORECASE)
_QUOTED = re.compile(r"[\"“]([^\"“”\n]{2,80})[\"”]")
_CODE = re.compile(r"`[^`\n]*`|```.*?```|https?://\S+|\S+@\S+\.\w+|(?:[\w.-]+/)+[\w.-]+", re.DOTALL)
# Between two name words: "Lord of the Rings", "Leonardo da Vinci", "Bank of America".
_JOINERS = frozenset("of the de da di du del della la le van von der den al bin".split())
_TITLES = {"dr": "person", "doctor": "person", "mr": "person", "mrs": "person", "ms": "person",
           "miss": "person", "prof": "person", "professor": "person", "sir": "person", "dame": "person",
           "aunt": "person", "auntie": "person", "uncle": "person", "grandma": "person", "grandpa": "person",
           "coach": "person", "captain": "person", "capt": "person", "rev": "person", "father": "person",
           "sister": "person", "brother": "person", "st": "place", "mt": "place", "mount": "place", "lake": "place"}
# Capitalised, but not names: the first person, calendar words (a date is not an entity), kin
# words used as names ("my Mom"), and acronyms of chat.
_NOT_NAMES = frozenset("""
i i'm i've i'll i'd im ive
monday tuesday wednesday thursday friday saturday sunday
january february march april may june july august september october november december
christmas thanksgiving easter halloween
mom mum dad mommy daddy mama papa ma pa grandma grandpa granny nana
ok okay lol omg btw tbh imo imho fyi asap diy tv am pm ps aka etc vs eg ie ai
god yes no hey hi hello oh wow yeah
""".split())
# Words that are never names, capitalised or not: a run of capitalised words loses them at its
# start ("It's Seattle", "Let's"), and one of them alone is no name.
_FUNCTION = frozenset("""
a an the this that these those it it's its i'm i've i'll i'd we we're we've we'll you you're you've
you'll they they're he he's she she's my our your his her their me us them him
there there's here here's what what's where where's who who's how how's why when which
let let's lets is are was were be been am do does did done have has had can could will would
should shall may might must not don't didn't doesn't can't won't isn't wasn't aren't
in on at for to from with by of off up down out over under after before since until into onto
about as if so and but or nor yet also then now just only even still
some any every each all both either neither no none many much more most few several
maybe please today tonight yesterday tomorrow last next
""".split())
# Words that open a sentence before a name ("Hey Mel!", "Thanks Nate!", "Wow Joanna, ..."):
# dropped from the start of a capitalised span at a sentence's start.
_OPENERS = frozenset("""
hey hi hello dear thanks thank yes yeah yep yup no nope oh ooh wow whoa woah aww aw awesome
congrats congratulations great good nice cool sure ok okay well so and but hmm haha ha lol
sorry bye goodbye see morning evening night cheers welcome love miss happy glad hope omg
agree agreed right absolutely totally definitely exactly true indeed alright man dude girl
""".split())
_ORGANISATION_WORDS = frozenset("""
inc corp corporation ltd llc plc co company university college school academy institute
foundation association society club bank hospital clinic church agency council ministry
department labs studio studios group team league federation union party museum gallery
library center centre
""".split())
# Places that a name alone tells: continents, countries, US states, and large or well-known cities.
_PLACES = frozenset("-".join(re.split(r"\W+", part.strip().lower())) for part in """
africa, antarctica, asia, europe, north america, south america, oceania, australia, the middle east,
afghanistan, albania, algeria, argentina, armenia, austria, azerbaijan, bangladesh, belarus, belgium,
bolivia, bosnia, brazil, bulgaria, cambodia, cameroon, canada, chile, china, colombia, costa rica,
croatia, cuba, cyprus, czechia, czech republic, denmark, ecuador, egypt, england, estonia, ethiopia,
finland, france, georgia, germany, ghana, greece, guatemala, haiti, honduras, hungary, iceland,
india, indonesia, iran, iraq, ireland, israel, italy, jamaica, japan, jordan, kazakhstan, kenya,
korea, south korea, north korea, kuwait, laos, latvia, lebanon, libya, lithuania, luxembourg,
madagascar, malaysia, mali, malta, mexico, moldova, mongolia, morocco, mozambique, myanmar, nepal,
netherlands, holland, new zealand, nicaragua, niger, nigeria, norway, pakistan, panama, paraguay,
peru, philippines, poland, portugal, qatar, romania, russia, rwanda, saudi arabia, scotland,
senegal, serbia, singapore, slovakia, slovenia, somalia, south africa, spain, sri lanka, sudan,
sweden, switzerland, syria, taiwan, tanzania, thailand, tunisia, turkey, uganda, ukraine,
united kingdom, uk, united states, usa, us, america, uruguay, uzbekistan, venezuela, vietnam,
wales, yemen, zambia, zimbabwe, hawaii, alaska, puerto rico,
alabama, arizona, arkansas, california, colorado, connecticut, delaware, florida, idaho, illinois,
indiana, iowa, kansas, kentucky, louisiana, maine, maryland, massachusetts, michigan, minnesota,
mississippi, missouri, montana, nebraska, nevada, new hampshire, new jersey, new mexico, new york,
north carolina, north dakota, ohio, oklahoma, oregon, pennsylvania, rhode island, south carolina,
south dakota, tennessee, texas, utah, vermont, virginia, washington, west virginia, wisconsin, wyoming,
amsterdam, athens, atlanta, austin, bangkok, barcelona, beijing, berlin, boston, brussels, budapest,
buenos aires, cairo, cape town, chicago, copenhagen, dallas, delhi, new delhi, denver, detroit, dubai,
dublin, edinburgh, florence, hamburg, hong kong, honolulu, houston, istanbul, jakarta, jerusalem,
kyiv, kiev, lagos, las vegas, lisbon, london, los angeles, la, lyon, madrid, manchester, manila,
melbourne, miami, milan, montreal, moscow, mumbai, munich, nairobi, naples, nashville, nyc,
orlando, osaka, oslo, paris, philadelphia, phoenix, portland, prague, rio, rio de janeiro, rome,
san diego, san francisco, sf, seattle, seoul, shanghai, singapore, stockholm, sydney, tampa,
tel aviv, tokyo, toronto, vancouver, venice, vienna, warsaw, zurich, brooklyn, manhattan, queens,
silicon valley, the bay area, bay area
""".replace("\n", " ").split(","))
_SENTENCE_END = frozenset(".!?…:;\n•*#|>")
_OPENING = frozenset("\"'“‘([{-–—*#>|•")


@dataclass(frozen=True)
class Entity:
    """One mention: the name as written (possessive and title off), its type, where it is."""

    name: str
    type: str
    start: int
    end: int

    @property
    def key(self) -> str:
        return key(self.name)


@functools.lru_cache(maxsize=8192)
def key(name: str) -> str:
    """The one form of a name: "Priya", "priya", "Priya's", "Dr. Priya" -> "priya";
    "New York" -> "new-york". Empty when nothing of a name is left."""
    text = unicodedata.normalize("NFKC", name).strip()
    text = _POSSESSIVE.sub("", text)
    words = [w for w in re.split(r"[^\w]+", text.casefold()) if w]
    while len(words) > 1 and words[0] in _TITLES:
        words = words[1:]
    return "-".join(words)[:MAX_NAME_CHARS]


def tag(name: str) -> str:
    """The tag a memory about `name` carries: `entity:<key>`."""
    return TAG_PREFIX + key(name)


def recognise(text: str, speakers: Iterable[str] = (), known: Container[str] = ()) -> list[Entity]:
    """The entities `text` names, in order, each key once (its first mention), at most
    `MAX_ENTITIES`. `speakers`: the conversation's participants and the user's own names
    (people, recognised wherever they appear). `known`: keys already known (an entity of the
    graph): evidence for a name that opens a sentence."""
    if not text or not any(c.isupper() for c in text):
        return []
    people = {key(s) for s in speakers if s and key(s)}
    firsts = {k.split("-", 1)[0] for k in people}
    masked = _CODE.sub(lambda m: " " * len(m.group()), text)
    found: dict[str, Entity] = {}

    def add(entity: Entity) -> None:
        k = entity.key
        if k and k not in found and len(found) < MAX_ENTITIES and k not in _NOT_NAMES:
            found[k] = entity

    quoted: list[tuple[int, int]] = []
    for match in _QUOTED.finditer(masked):
        inner = match.group(1).strip()
        words = inner.split()
        if 1 <= len(words) <= 8 and inner[0].isupper() and all(
                w[0].isupper() or w[0].isdigit() or w.lower() in _JOINERS or w.lower() in ("a", "an", "and", "with", "in", "on", "to", "for")
                for w in words) and not inner.endswith((".", "!", "?", ",")):
            add(Entity(inner, "work", match.start(1), match.start(1) + len(inner)))
            quoted.append((match.start(), match.end()))

    spans = list(_spans(masked, quoted))
    capitalised_inside = {key(w) for words, at_start in spans for w, _s, _e in words[1 if at_start else 0:]}
    for words, at_start in spans:
        if at_start:
            words = _drop_openers(words)
            if not words:
                continue
            if len(words) == 1 and not _evidence(words[0][0], people, firsts, known, capitalised_inside):
                continue
        name = masked[words[0][1]:words[-1][2]]
        title = None
        first = words[0][0].rstrip(".").lower()
        if len(words) > 1 and first in _TITLES:
            title = _TITLES[first]
        add(Entity(_POSSESSIVE.sub("", name), _type(name, words, title, people, firsts), words[0][1],
                   words[-1][2]))
    people_here = [k for k, e in found.items() if e.type == "person" and "-" in k]
    for k, entity in list(found.items()):
        if entity.type == "other" and any(p.startswith(k + "-") or p.endswith("-" + k) for p in people_here):
            found[k] = Entity(entity.name, "person", entity.start, entity.end)  # "Priya" after "Dr. Priya Patel"
    return sorted(found.values(), key=lambda e: e.start)


# A capitalised word (Latin, Greek, Cyrillic capitals), not inside another word.
_CAPITALISED = re.compile(r"(?<![\w'’-])[A-ZÀ-ÖØ-ÞĀ-ſΑ-ΩА-Я][\w]*(?:['’\-][^\W\d_]\w*)*")
# What may stand between two words of one name: spaces, at most two joiners ("Lord of the
# Rings"), a title's dot ("Dr. Patel").
_JOINED = re.compile(r"\s{1,3}(?:(?:" + "|".join(sorted(_JOINERS)) + r")\s{1,3}){0,2}")
_TITLE_DOT = re.compile(r"\.\s{1,3}")


def _spans(text: str, quoted: list[tuple[int, int]]):
    """Runs of capitalised words, one name each: yields ([(word, start, end)], opens a sentence)."""
    run: list[tuple[str, int, int]] = []
    at_start = False
    for match in _CAPITALISED.finditer(text):
        word, start, end = match.group(), match.start(), match.end()
        if quoted and any(a <= start < b for a, b in quoted):
            continue
        if quoted and not run and any(b <= start and not text[b:start].strip() for _a, b in quoted):
            continue  # "The Lord of the Rings" Trilogy: a word right after a title goes with it
        if not _is_name_word(word):
            if run:
                yield run, at_start
                run = []
            continue
        if run:
            gap_start = run[-1][2]
            joined = _JOINED.fullmatch(text, gap_start, start) or (
                run[-1][0].lower() in _TITLES and _TITLE_DOT.fullmatch(text, gap_start, start))
            if joined and len(run) < MAX_SPAN_WORDS:
                run.append((word, start, end))
                continue
            yield run, at_start
        run, at_start = [(word, start, end)], _opens_sentence(text, start)
    if run:
        yield run, at_start


def _is_name_word(word: str) -> bool:
    if not word[0].isupper():
        return False
    bare = _POSSESSIVE.sub("", word)
    lowered = word.lower().replace("’", "'")
    if bare.lower() in _NOT_NAMES or lowered in _FUNCTION:
        return False
    if len(bare) > 30 or sum(c.isdigit() for c in bare) > 2:
        return False  # an id, a hash, a key: not a name
    if bare.isupper():
        return 2 <= len(bare) <= 8  # an acronym; "I" alone is no name
    return True


def _opens_sentence(text: str, start: int) -> bool:
    """Is the word at `start` the first of a sentence (or of the text, a line, a list item)?"""
    i = start - 1
    while i >= 0 and (text[i] in " \t" or text[i] in _OPENING):
        if text[i] == "\n":
            return True
        i -= 1
    if i < 0:
        return True
    if text[i] in _SENTENCE_END:
        # "Dr. Patel": the dot of a title is not a sentence's end.
        before = re.search(r"(\w+)\.$", text[max(0, i - 12):i + 1])
        return not (before and before.group(1).lower() in _TITLES)
    return False


def _drop_openers(words: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    while words and (words[0][0].lower() in _OPENERS or words[0][0].lower() in _FUNCTION):
        words = words[1:]
    return words


def _evidence(word: str, people: set[str], firsts: set[str], known: Container[str], inside: set[str]) -> bool:
    """Is a lone capitalised word that opens a sentence a name?"""
    k = key(word)
    if not k or k in _NOT_NAMES or k in _OPENERS:
        return False
    bare = _POSSESSIVE.sub("", word)
    return (k in people or k in firsts or k in _PLACES or k in known or k in inside
            or any(c.isupper() for c in bare[1:]) and not bare.isupper())


def _type(name: str, words: list[tuple[str, int, int]], title: str | None, people: set[str],
          firsts: set[str]) -> str:
    k = key(name)
    if title:
        return title
    if k in people or k in firsts or k.split("-", 1)[0] in firsts:
        return "person"
    if k in _PLACES:
        return "place"
    lowered = k.split("-")
    if len(lowered) > 1 and (lowered[-1] in _ORGANISATION_WORDS or (lowered[0] in _ORGANISATION_WORDS
                                                                     and lowered[1] == "of")):
        return "organisation"
    return "other"


# ---------------------------------------------------------------------------------- the graph
def link_tags(entities: Iterable[Entity]) -> list[str]:
    """The tags a memory naming `entities` carries."""
    return list(dict.fromkeys(TAG_PREFIX + e.key for e in entities if e.key))


def link_metadata(entities: Iterable[Entity]) -> dict[str, str]:
    """What a memory's metadata keeps of them: each name as first written, and its type."""
    return {e.name: e.type for e in entities if e.key}


class Known:
    """The entity keys a scope's reader already has memories about, for `recognise(known=…)`:
    asked one key at a time against the graph's tag index (no listing is built)."""

    def __init__(self, graph: SoulGraph, scope: str = record.DEFAULT_SCOPE) -> None:
        self.graph, self.scope = graph, scope

    def __contains__(self, k: object) -> bool:
        ids = self.graph.tags.get(TAG_PREFIX + str(k))
        if not ids:
            return False
        nodes = self.graph.nodes
        return any(nodes[i].scope in (record.DEFAULT_SCOPE, self.scope) for i in ids if i in nodes)


def _sees(scope: str) -> Callable[[Node], bool]:
    return lambda node: node.scope == record.DEFAULT_SCOPE or node.scope == scope


def resolve(graph: SoulGraph, name: str, scope: str = record.DEFAULT_SCOPE) -> list[str]:
    """The entity tags `name` reaches for a reader of `scope`: its own key, and the longer names
    whose first or last word it is ("Priya" reaches `priya-patel`; "Patel" too). Only tags
    that hold a memory the reader sees."""
    k = key(name)
    if not k:
        return []
    sees = _sees(scope)
    nodes = graph.nodes
    wanted = TAG_PREFIX + k
    out = []
    for t, ids in graph.tags.items():
        if not t.startswith(TAG_PREFIX):
            continue
        rest = t[len(TAG_PREFIX):]
        if t == wanted or rest.startswith(k + "-") or rest.endswith("-" + k):
            if any(sees(nodes[i]) for i in ids if i in nodes):
                out.append(t)
    return sorted(out, key=lambda t: (t != wanted, t))


def about(graph: SoulGraph, name: str, k: int = 10, *, scope: str = record.DEFAULT_SCOPE, tag: str | None = None,
          include_archived: bool = False, where: Callable[[Node], bool] | None = None,
          exclude: AbstractSet[str] = frozenset(), include_flagged: bool = False) -> list[Node]:
    """The memories about `name` a reader of `scope` sees: typed memories first (facts,
    preferences, plans drawn from the conversation), then conversation turns; the newest
    (last confirmed) first within each. `tag`, `where`, `exclude`: narrowed further;
    `include_flagged`: flagged memories too (for an answer that shows them withheld)."""
    sees = _sees(scope)
    ids: set[str] = set()
    for t in resolve(graph, name, scope):
        ids |= graph.tags.get(t, set())
    if tag is not None:
        ids &= graph.tags.get(tag, set())
    nodes = [node for i in ids if i not in exclude and (node := graph.nodes.get(i)) is not None and sees(node)
             and (include_archived or node.status == ACTIVE) and (where is None or where(node))
             and (include_flagged or not record.flagged(node.metadata))]
    nodes.sort(key=lambda n: (n.kind == "episodic_event", -n.confirmed_at, n.id))
    return nodes[:k]


def where_about(tags: Iterable[str], also: Callable[[Node], bool] | None = None) -> Callable[[Node], bool]:
    """The predicate of memories carrying one of `tags` (and accepted by `also`, if given)."""
    wanted = frozenset(tags)
    if also is None:
        return lambda node: not wanted.isdisjoint(node.tags)
    return lambda node: not wanted.isdisjoint(node.tags) and also(node)


COMMON_SHARE = 0.01  # an entity tagged on more than this share of the memories (and on more than 3) tells none apart


def query_tags(graph: SoulGraph, text: str, scope: str = record.DEFAULT_SCOPE,
               speakers: Iterable[str] = ()) -> list[str]:
    """The entity tags a coming turn's text names that a reader of `scope` already has
    memories about (for prefetch: `boost`), but not the common ones: the people who do the
    talking are named in most of what is held ("what did Caroline say about …?" in a chat
    between Caroline and Melanie), and, as a word in every memory, boosting them would only
    favour whatever mentions them. Costs one recognition and one tag lookup per name."""
    known = Known(graph, scope)
    common = max(3, COMMON_SHARE * len(graph.nodes))
    out = []
    for entity in recognise(text, speakers, known):
        if entity.key in known and len(graph.tags.get(TAG_PREFIX + entity.key, ())) <= common:
            out.append(TAG_PREFIX + entity.key)
    return out


BOOST = 0.5  # a hit about an entity of the turn: its score × (1 + BOOST)
BOOST_EXTRA = 3  # memories about those entities added when the search did not reach them


def boost(graph: SoulGraph, hits: list[Hit], tags: Iterable[str], *, scope: str = record.DEFAULT_SCOPE,
          exclude: AbstractSet[str] = frozenset(), extra: int = BOOST_EXTRA) -> list[Hit]:
    """`hits` re-ranked for the entities of the turn (`query_tags`): those about one of `tags`
    score (1 + BOOST) times more, and up to `extra` of the newest active memories about them
    the search did not reach come in at the median score (`via` "about <key>")."""
    tags = [t for t in tags if t in graph.tags]
    if not tags:
        return hits
    wanted = set(tags)
    out = [Hit(h.node, h.score * (1 + BOOST), h.via) if wanted.intersection(h.node.tags) else h for h in hits]
    have = {h.node.id for h in hits}
    scores = sorted(h.score for h in hits)
    base = scores[len(scores) // 2] if scores else 1.0
    sees = _sees(scope)
    added = 0
    for t in tags:
        fresh = [n for i in graph.tags[t] if i not in have and i not in exclude and (n := graph.nodes.get(i)) is not None
                 and sees(n) and n.status == ACTIVE and not record.flagged(n.metadata) and n.privacy == "normal"]
        fresh.sort(key=lambda n: (n.kind == "episodic_event", -n.confirmed_at, n.id))
        for node in fresh[: max(0, extra - added)]:
            out.append(Hit(node, base, f"about {t[len(TAG_PREFIX):]}"))
            have.add(node.id)
            added += 1
    out.sort(key=lambda h: (-h.score, h.node.id))
    return out


def entity_list(graph: SoulGraph, scope: str = record.DEFAULT_SCOPE) -> list[dict]:
    """Every entity a reader of `scope` has memories about: key, a name as written, its type,
    how many memories (most first)."""
    sees = _sees(scope)
    out = []
    for t, ids in graph.tags.items():
        if not t.startswith(TAG_PREFIX):
            continue
        seen = [n for i in ids if (n := graph.nodes.get(i)) is not None and sees(n)]
        if not seen:
            continue
        k = t[len(TAG_PREFIX):]
        name, kind = k, "other"
        for node in seen:
            names = node.metadata.get(METADATA_KEY)
            if isinstance(names, dict):
                for written, typed in names.items():
                    if key(written) == k:
                        name, kind = written, typed
                        break
        out.append({"key": k, "name": name, "type": kind, "memories": len(seen)})
    out.sort(key=lambda e: (-e["memories"], e["key"]))
    return out

