"""A layered soul into one Hermes home: seed 003's install steps 2–6 (`soulrepo import`).

Like the installer, it first works out what would change (the plan), then makes exactly
those changes; `--check` stops after the plan and shows it, with diffs. In order:

2. Validate the repository (`validate.py`): any problem and nothing is touched.
3. Identity: SOUL.md → `<home>/SOUL.md`, USER.md → `<home>/memories/USER.md` (as Hermes'
   entries joined by `§`; a flagged stretch and what its taint reaches stay one entry),
   IDENTITY.md → `<home>/IDENTITY.md`. Written only where the file
   is missing, empty, or still Hermes' own default persona; a file the user wrote stays
   unless `overwrite_identity`, and then a copy goes to `.soulgraph/backups/` first.
4. Skills: each reviewed skill folder (one holding a SKILL.md the `skills` globs match) →
   `<home>/skills/<same path>`. A skill we did not put there is never replaced; one we did,
   edited since by hand, is left alone too (`.soulgraph/soul-import.json` holds the
   SHA-256 of every file we wrote). A skill gone from the repository is removed when
   untouched.
5. Memories, into the soul graph through the one write path (every string scanned, the
   file paths and provenance too): every entry of SOUL.md and IDENTITY.md as a pinned axiom,
   of USER.md and the `memory` files as a memory. An entry that reads like prompt injection
   is stored flagged (private, never pinned, withheld from prompts) and listed in the
   report's `flagged`; one whose strings hold a secret is refused (`memories.refused`).
   Provenance: `source` is `import:<origin>@<commit>:<path>`, and `metadata.import` holds
   origin, path, entry number and commit. An entry already imported from this origin is
   left as it is (so a second import of one commit changes nothing); a changed entry
   supersedes the one it replaces (paired within a file by shared words); an entry gone
   from the repository is archived. An entry the graph already holds from elsewhere (seeded
   from the same SOUL.md) is not added twice.
   The `learned` layer (memories/learned/*.jsonl, learned.py) adds the memories an agent learned,
   each with its kind, scope and tags, and its first provenance in `metadata.learned` (home,
   agent, id, source, writer, created time, session, turn). One learned in this very home (its
   provenance names it) is not added back, even where it has been superseded or forgotten
   since; a curated entry whose text a learned memory holds is not added twice.
6. Sessions: never read, never touched.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from soulgraph.engine import record
from soulgraph.engine.graph import SoulGraph
from soulgraph.hermes.home import HermesHomeError, resolve_home
from soulgraph.hermes.markdown_entries import Block, normalise, parse_blocks, stretches
from soulgraph.hermes.seed import flagged_report, seed_graph
from soulgraph.memory import guard, lifecycle
from soulgraph.memory.markdown_files import SEPARATOR, locked
from soulgraph.memory.write import RefusedMemory, remember
from soulgraph.soulrepo import learned
from soulgraph.soulrepo.export import is_placeholder_identity
from soulgraph.soulrepo.validate import ARTIFACT_NAMES, ARTIFACT_SUFFIXES, validate
from soulgraph.store import SoulFile, SoulFileError
from soulgraph.store.atomic import write_atomically

STATE_FILE = Path(".soulgraph") / "soul-import.json"
BACKUPS = Path(".soulgraph") / "backups"
SOUL_FILE = "soul.json"
WRITER = "import"
IMPORT_TAG = "soul-import"
GIT_TIMEOUT = 30  # seconds, each git command
# SHA-256 of the SOUL.md texts hermes-agent 0.19 writes itself (stripped, LF line ends): its
# one-paragraph default persona and the two comment-only templates older installers wrote.
# A file still holding one carries no user intent (Hermes itself upgrades the templates).
HERMES_DEFAULT_SOUL = {
    "2765a846e1bb371d78d3b93b403dfb0f8d1ba1a9895edb5f608367abfe81194d",
    "82fa3438d86f8b95c6e96be89d853c8b561b3e6973ed61c90e70e0231dd24a7e",
    "6bc146a50e8fe3bd555e89a77e93af1f781cece8cf549f0d7a02ee2389811c72",
}
PAIRING_THRESHOLD = 0.3  # shared-word share above which a new entry replaces an old one
WORD = re.compile(r"\w+")

# Where each core file goes in a Hermes home, and how its entries enter the graph.
IDENTITY_TARGETS = {"soul": "SOUL.md", "user": "memories/USER.md", "identity": "IDENTITY.md"}
AXIOM_ROLES = ("soul", "identity")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Report:
    repo: str
    hermes_home: str | None = None
    origin: str | None = None
    commit: str | None = None
    check: bool = False
    status: str = "unchanged"  # changed | unchanged | error
    identity: dict[str, str] = field(default_factory=dict)  # target -> what happened
    skills: dict[str, str] = field(default_factory=dict)  # skill path -> what happened
    memories: dict[str, int] = field(default_factory=lambda: {
        "added": 0, "unchanged": 0, "already_known": 0, "superseded": 0, "archived": 0, "refused": 0, "flagged": 0})
    # Entries the scanner flagged as prompt injection: stored private, never pinned, withheld
    # from prompts ({"id", "path", "entry", "rules", "pin_dropped"} each).
    flagged: list[dict[str, Any]] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)  # one line per change, in order
    diff: str = ""
    backups: list[str] = field(default_factory=list)
    replaced: set[str] = field(default_factory=set)  # identity files this import writes
    sessions: str = "untouched (archive only)"
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        counts = self.memories
        summary = (f"soul {self.commit[:12] if self.commit else '?'}: {len(self.changes)} change"
                   f"{'s' if len(self.changes) != 1 else ''} (memories +{counts['added']} "
                   f"~{counts['superseded']} -{counts['archived']})")
        return {"repo": self.repo, "hermes_home": self.hermes_home, "origin": self.origin, "commit": self.commit,
                "check": self.check, "status": self.status, "summary": summary, "identity": self.identity,
                "skills": self.skills, "memories": self.memories, "flagged": self.flagged, "changes": self.changes,
                "diff": self.diff,
                "backups": self.backups, "sessions": self.sessions, "warnings": self.warnings, "errors": self.errors}


# ------------------------------------------------------------------ where the tree comes from
def describe_origin(repo: Path) -> tuple[str, str | None]:
    """(origin, commit) of a git checkout: the remote URL without credentials (else the
    folder), and HEAD when the tree has no uncommitted change (else None)."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                                  timeout=GIT_TIMEOUT, stdin=subprocess.DEVNULL,
                                  env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != repo.resolve():  # not a checkout of its own (maybe inside another)
        return str(repo.resolve()), None
    origin = strip_credentials(git("remote", "get-url", "origin") or str(repo.resolve()))
    dirty = git("status", "--porcelain", "--untracked-files=normal")
    return origin, (git("rev-parse", "HEAD") if dirty == "" else None)


def strip_credentials(url: str) -> str:
    """`https://user:token@host/x` → `https://host/x` (a URL recorded in every memory's provenance)."""
    return re.sub(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", r"\1", url)


def tree_digest(repo: Path, files: list[str]) -> str:
    digest = hashlib.sha256()
    for relative in sorted(files):
        digest.update(relative.encode() + b"\0" + (repo / relative).read_bytes() + b"\0")
    return digest.hexdigest()


# ------------------------------------------------------------------ the state we keep in the home
def read_state(home: Path) -> dict[str, Any]:
    try:
        data = json.loads((home / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_state(home: Path, state: dict[str, Any]) -> None:
    (home / STATE_FILE).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomically(home / STATE_FILE, (json.dumps(state, indent=2, sort_keys=True) + "\n").encode(), mode=0o600)


# ------------------------------------------------------------------ the import
def import_soul(repo: str | os.PathLike[str], hermes_home: str | os.PathLike[str] | None = None, *,
                origin: str | None = None, commit: str | None = None, overwrite_identity: bool = False,
                check: bool = False, clock: Callable[[], float] = time.time) -> Report:
    root = Path(repo).absolute()
    report = Report(str(root), check=check)
    try:
        home = resolve_home(hermes_home).path
    except HermesHomeError as exc:
        return _failed(report, str(exc))
    report.hermes_home = str(home)
    if not home.is_dir():
        return _failed(report, f"no Hermes home at {home}")
    checked = validate(root)
    if not checked.ok:
        return _failed(report, *(f"{root.name}/{p}" if p.path != "." else p.message for p in checked.problems),
                       lead=f"{root} is not a valid layered soul; nothing was imported")
    found_origin, found_commit = (None, None) if origin and commit else describe_origin(root)
    report.origin = strip_credentials(origin) if origin else found_origin
    every_file = sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                        if p.is_file() and ".git" not in p.relative_to(root).parts)
    report.commit = commit or found_commit or f"tree-{tree_digest(root, every_file)[:12]}"
    if not commit and not found_commit:
        report.warnings.append(f"{root} is not a clean git checkout: provenance names its content digest "
                               f"({report.commit}); pass --commit SHA to name the commit it came from")
    # The provenance goes into every memory and into the home's import state: a secret there,
    # or text that reads like prompt injection, stops the import before anything is written.
    try:
        found = guard.inspect(iter([("origin", report.origin or ""), ("commit", report.commit or "")]), "import")
    except RefusedMemory as exc:
        report.origin = report.commit = None
        return _failed(report, str(exc), lead="nothing was imported")
    if found:
        bad = ", ".join(f"{name} ({', '.join(rules)})" for name, rules in found.items())
        report.origin = report.commit = None
        return _failed(report, f"import: {bad}: reads like prompt injection", lead="nothing was imported")
    manifest = checked.manifest or {}
    state = read_state(home)
    try:
        _identity(root, home, manifest["core_files"], overwrite_identity, report, clock)
        skill_files = _skills(root, home, checked.files.get("skills", []), state, report)
        _memories(root, home, manifest["core_files"], checked.files.get("memory", []), report, clock,
                  checked.files.get(learned.LAYER, []))
    except (OSError, SoulFileError) as exc:
        return _failed(report, str(exc))
    if (state.get("commit"), state.get("origin")) != (report.commit, report.origin):
        report.changes.append(f"{STATE_FILE}: soul {report.commit} from {report.origin}"
                              + (f" (was {state.get('commit')})" if state.get("commit") else ""))
    if report.changes:
        report.status = "changed"
    # A skill found in place, identical, is recorded as ours without counting as a change.
    if not check and (report.changes or skill_files != state.get("skills")):
        _write_state(home, {"origin": report.origin, "commit": report.commit,
                            "imported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock())),
                            "agent_id": manifest.get("agent_id"), "skills": skill_files})
    return report


def _failed(report: Report, *errors: str, lead: str | None = None) -> Report:
    report.status = "error"
    report.errors = ([lead] if lead else []) + list(errors)
    return report


# ------------------------------------------------------------------ 3. identity files
def _hermes_format(text: str) -> str:
    """A soul repo's USER.md (markdown bullets) as Hermes writes memories/USER.md: each entry
    an entry of its own (headings left out), except that the blocks next to each other that the
    write guard taints (text that reads like injection, and what it reaches: `flagged_context`)
    stay one entry, a tainted heading's text in it too, so seeding the home judges them
    together as the import does."""
    blocks = parse_blocks(text)
    tainted = flagged_context(blocks)
    kept: list[str] = []
    last: Block | None = None  # the last kept block, when tainted: a tainted one of its § entry goes on in it
    for at, block in enumerate(blocks):
        if block.kind != "entry" and at not in tainted:
            continue
        if at in tainted and last is not None and last.entry == block.entry:
            kept[-1] += "\n\n" + block.content
        else:
            kept.append(block.content)
        last = block if at in tainted else None
    return SEPARATOR.join(kept)


def flagged_context(blocks: list[Block]) -> dict[int, list[str]]:
    """{block index: rules} of the flagged text each block of a parsed file is written beside."""
    return guard.context_of([b.content for b in blocks], stretches(blocks))


def unified_diff(old: str, new: str, name: str) -> str:
    def lines(text: str) -> list[str]:
        found = text.splitlines(True)
        if found and not found[-1].endswith("\n"):
            found[-1] += "\n\\ No newline at end of file\n"
        return found

    return "".join(difflib.unified_diff(lines(old), lines(new), f"a/{name}", f"b/{name}"))


def _is_default(text: str) -> bool:
    flat = text.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff").strip()
    return not flat or sha256(flat.encode()) in HERMES_DEFAULT_SOUL


def _identity(root: Path, home: Path, core: dict[str, str], overwrite: bool, report: Report, clock) -> None:
    for role, target_name in IDENTITY_TARGETS.items():
        source = (root / core[role]).read_text(encoding="utf-8")
        if role == "identity" and is_placeholder_identity(source):
            report.identity[target_name] = "the export's placeholder (a home without one): nothing to write"
            continue
        wanted = _hermes_format(source) if role == "user" else source
        target = home / target_name
        try:
            current = target.read_text(encoding="utf-8") if target.is_file() else None
        except UnicodeDecodeError:
            current = ""  # not text we can compare: only --overwrite-identity replaces it
            report.warnings.append(f"{target_name}: not UTF-8 text")
        if current is not None and (current == wanted or current.strip() == wanted.strip()):
            report.identity[target_name] = "unchanged"
            continue
        if not wanted.strip():
            report.identity[target_name] = "nothing to write (empty in the soul repo)"
            continue
        replaceable = current is None or _is_default(current)
        if not replaceable and not overwrite:
            report.identity[target_name] = "kept: the home's own differs (--overwrite-identity replaces it, with a backup)"
            continue
        action = "created" if current is None else ("replaced Hermes' default" if replaceable else "replaced")
        report.replaced.add(target_name)
        report.identity[target_name] = action if not report.check else f"would be {action}"
        report.changes.append(f"{target_name}: {action} from {core[role]}")
        report.diff += unified_diff(current or "", wanted, target_name)
        if report.check:
            continue
        if current is not None and not _is_default(current):
            backup = home / BACKUPS / f"{target.name}.{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(clock()))}"
            backup.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            shutil.copy2(target, backup)
            report.backups.append(str(backup))
        data = wanted if wanted.endswith("\n") or role == "user" else wanted + "\n"
        if role == "user":
            with locked(target):  # Hermes' own lock for its memory files
                write_atomically(target, data.encode("utf-8"), default_mode=0o600)
        else:
            write_atomically(target, data.encode("utf-8"), default_mode=0o644)


# ------------------------------------------------------------------ 4. skills
def _skill_folders(root: Path, matched: list[str]) -> dict[str, dict[str, bytes]]:
    """Reviewed skill folders (those with a SKILL.md among the matched files), each with
    its regular files (no runtime artifacts)."""
    folders: dict[str, dict[str, bytes]] = {}
    for relative in matched:
        if not relative.endswith("/SKILL.md") or not relative.startswith("skills/"):
            continue
        folder = root / relative.rsplit("/", 1)[0]
        files = {}
        for path in sorted(folder.rglob("*")):
            inner = path.relative_to(folder)
            if path.is_symlink() or not path.is_file() or any(p in ARTIFACT_NAMES or p == ".git" for p in inner.parts) \
                    or path.name.endswith(ARTIFACT_SUFFIXES):
                continue
            files[inner.as_posix()] = path.read_bytes()
        folders[folder.relative_to(root).as_posix()] = files
    return folders


def _skill_state(target: Path, recorded: dict[str, str] | None, wanted: dict[str, bytes]) -> str:
    """new | same | ours (unchanged since we wrote it) | edited | foreign"""
    if not target.exists():
        return "new"
    present = {p.relative_to(target).as_posix(): p for p in target.rglob("*") if p.is_file() and not p.is_symlink()}
    if set(present) == set(wanted) and all(present[f].read_bytes() == wanted[f] for f in wanted):
        return "same"
    if recorded is None:
        return "foreign"
    for name, digest in recorded.items():
        if name in present and sha256(present[name].read_bytes()) != digest:
            return "edited"
    extra = set(present) - set(recorded)
    return "edited" if extra else "ours"


def _skills(root: Path, home: Path, matched: list[str], state: dict[str, Any], report: Report) -> dict[str, dict[str, str]]:
    recorded_all: dict[str, dict[str, str]] = state.get("skills") if isinstance(state.get("skills"), dict) else {}
    folders = _skill_folders(root, matched)
    kept: dict[str, dict[str, str]] = {}
    for skill, wanted in folders.items():
        target = home / skill
        recorded = recorded_all.get(skill)
        found = _skill_state(target, recorded, wanted)
        digests = {name: sha256(data) for name, data in wanted.items()}
        if found == "same":
            report.skills[skill] = "unchanged"
            kept[skill] = digests
            continue
        if found in ("foreign", "edited"):
            report.skills[skill] = ("hand-written, left alone" if found == "foreign"
                                    else "edited here since imported, left alone")
            if recorded is not None:
                kept[skill] = recorded
            continue
        action = "installed" if found == "new" else "updated"
        report.skills[skill] = action if not report.check else f"would be {action}"
        report.changes.append(f"{skill}/: {action} ({len(wanted)} file{'s' if len(wanted) != 1 else ''})")
        for name, data in wanted.items():
            old = target / name
            before = old.read_bytes() if old.is_file() else b""
            if before != data:
                report.diff += unified_diff(before.decode("utf-8", "replace"), data.decode("utf-8", "replace"),
                                            f"{skill}/{name}")
        kept[skill] = digests
        if not report.check:
            _write_skill(target, wanted, set(recorded or ()) - set(wanted))
    for skill, recorded in recorded_all.items():
        if skill in folders:
            continue
        target = home / skill
        if not target.exists():
            continue
        if _skill_state(target, recorded, {}) == "ours":
            report.skills[skill] = "removed (gone from the soul repo)" if not report.check else "would be removed"
            report.changes.append(f"{skill}/: removed, gone from the soul repo")
            if not report.check:
                shutil.rmtree(target)
        else:
            report.skills[skill] = "gone from the soul repo, edited here: left alone"
    return kept


def _write_skill(target: Path, files: dict[str, bytes], stale: set[str]) -> None:
    if not target.exists():
        # A new skill appears whole: written beside, then renamed into place.
        temp = target.with_name(f".{target.name}.importing")
        shutil.rmtree(temp, ignore_errors=True)
        for name, data in files.items():
            (temp / name).parent.mkdir(parents=True, exist_ok=True)
            (temp / name).write_bytes(data)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(temp, target)
        return
    for name, data in files.items():
        write_atomically(target / name, data)
    for name in stale:
        (target / name).unlink(missing_ok=True)


# ------------------------------------------------------------------ 5. memories
@dataclass(frozen=True)
class Entry:
    path: str  # in the soul repo
    number: int  # 1-based, among the file's entries
    content: str
    pinned: bool
    tags: tuple[str, ...]
    context: tuple[str, ...] = ()  # rules of the flagged text it sits beside in its file (guard.CONTEXT)
    scope: str = ""  # whose memory it is (memory/scopes.py): shared unless a learned one says
    learned: learned.Learned | None = None  # a line of the learned layer, with its kind and provenance

    @property
    def key(self) -> tuple[str, str, str]:
        return self.path, normalise(self.content), self.scope


def read_learned(root: Path, files: list[str]) -> list[Entry]:
    """The learned layer's memories (validate() checked every line), one per text and scope."""
    found: dict[tuple[str, str], Entry] = {}
    for path in files:
        for item in learned.parse((root / path).read_text(encoding="utf-8"), path)[0]:
            entry = Entry(path, item.number, item.content, False, (*item.tags, learned.TAG, IMPORT_TAG),
                          scope=item.scope, learned=item)
            found.setdefault((normalise(item.content), item.scope), entry)
    return list(found.values())


def read_entries(root: Path, core: dict[str, str], memory_files: list[str], learned_files: list[str] = ()) -> list[Entry]:
    sources = [(core["soul"], True, ("soul", "axiom")), (core["identity"], True, ("identity", "axiom")),
               (core["user"], False, ("user",))]
    sources += [(path, False, ("memory",)) for path in memory_files if path not in {s[0] for s in sources}]
    found: list[Entry] = []
    for path, pinned, tags in sources:
        text = (root / path).read_text(encoding="utf-8")
        if path == core["identity"] and is_placeholder_identity(text):
            continue  # no identity of its own: the export wrote one because the schema wants it
        blocks = parse_blocks(text)
        context = flagged_context(blocks)
        # One entry per text; a text that appears twice carries the taint of each copy.
        first: dict[str, tuple[int, Block]] = {}
        rules: dict[str, set[str]] = {}
        entries = [(at, block) for at, block in enumerate(blocks) if block.kind == "entry"]
        for number, (at, block) in enumerate(entries, 1):
            first.setdefault(normalise(block.content), (number, block))
            rules.setdefault(normalise(block.content), set()).update(context.get(at, ()))
        for text, (number, block) in first.items():
            found.append(Entry(path, number, block.content.strip(), pinned, (*tags, IMPORT_TAG),
                               tuple(sorted(rules[text]))))
    typed = read_learned(root, list(learned_files))
    # A memory the agent learned through Hermes' memory tool is in its MEMORY.md / USER.md too:
    # the learned line (typed, with provenance) is the one kept.
    held = {normalise(entry.content) for entry in typed if entry.scope == ""}
    return [*typed, *(entry for entry in found if entry.pinned or normalise(entry.content) not in held)]


def _words(text: str) -> set[str]:
    return {w.lower() for w in WORD.findall(text)}


def _similarity(a: str, b: str) -> float:
    x, y = _words(a), _words(b)
    return len(x & y) / len(x | y) if x | y else 0.0


@dataclass
class MemoryPlan:
    unchanged: int = 0
    known: int = 0
    add: list[Entry] = field(default_factory=list)
    supersede: list[tuple[str, Entry]] = field(default_factory=list)  # (old node id, its replacement)
    archive: list[str] = field(default_factory=list)  # node ids


def _own(entry: Entry, home: str | None) -> bool:
    """A learned memory this home itself learned (and exported): still here, or edited,
    superseded, archived or forgotten here since. Either way the import has nothing to add."""
    info = entry.learned.provenance if entry.learned else None
    return bool(info) and home is not None and info.get("home") == home


def plan_memories(graph: SoulGraph, origin: str, entries: list[Entry], replaced_soul: bool = False,
                  home: str | None = None) -> MemoryPlan:
    """`replaced_soul`: the import writes the home's SOUL.md, so the axioms seeded from the
    SOUL.md it replaces (Hermes' default persona, or the user's, backed up) are archived.
    `home`: this home's identity (learned.home_identity), to know its own learned memories."""
    plan = MemoryPlan()
    wanted = {normalise(entry.content) for entry in entries}
    imported: dict[tuple[str, str, str], str] = {}
    elsewhere: dict[str, set[str]] = {}  # text -> the scopes holding it
    for node in graph.nodes.values():
        if node.status != "active":
            continue
        info = node.metadata.get("import")
        if isinstance(info, dict) and info.get("origin") == origin:
            imported[(info.get("path"), normalise(node.content), node.scope)] = node.id
        elif replaced_soul and node.source.startswith("seed:SOUL.md:") and normalise(node.content) not in wanted:
            plan.archive.append(node.id)
        else:
            elsewhere.setdefault(normalise(node.content), set()).add(node.scope)
    fresh: list[Entry] = []
    for entry in entries:
        if entry.key in imported:
            plan.unchanged += 1
            imported.pop(entry.key)
        elif elsewhere.get(entry.key[1], set()) & {"", entry.scope} or _own(entry, home):
            plan.known += 1  # a shared memory holds it, or one of its own scope, or this home learned it
        else:
            fresh.append(entry)
    # What is left of the old import changed or went: pair each old entry with the new entry
    # of the same file that shares most of its words, best pairs first.
    pairs = sorted(((_similarity(graph.get(node_id).content, entry.content), node_id, i)
                    for (path, _, scope), node_id in imported.items() for i, entry in enumerate(fresh)
                    if entry.path == path and entry.scope == scope),
                   reverse=True)
    paired_old: set[str] = set()
    paired_new: set[int] = set()
    for score, node_id, i in pairs:
        if score < PAIRING_THRESHOLD:
            break
        if node_id in paired_old or i in paired_new:
            continue
        paired_old.add(node_id)
        paired_new.add(i)
        plan.supersede.append((node_id, fresh[i]))
    plan.add = [entry for i, entry in enumerate(fresh) if i not in paired_new]
    plan.archive += sorted(node_id for node_id in imported.values() if node_id not in paired_old)
    return plan


def _memories(root: Path, home: Path, core: dict[str, str], memory_files: list[str], report: Report, clock,
              learned_files: list[str] = ()) -> None:
    entries = read_entries(root, core, memory_files, learned_files)
    own = learned.home_identity(home)
    soul_file = home / SOUL_FILE
    if not soul_file.exists():
        graph, _ = seed_graph(home, clock=clock)  # as the installer seeds it, so the host's own memories stay
        report.flagged += [{"id": item["id"], "path": f"(seeded from the home) {s['file']}", "entry": s["line"],
                            "rules": item["rules"], "pin_dropped": item["pin_dropped"]}
                           for item in flagged_report(graph) for s in item["sources"][:1]]
        if report.check:
            _memory_report(plan_memories(graph, report.origin, entries, "SOUL.md" in report.replaced, own), graph, report)
            report.changes.insert(0, f"{SOUL_FILE}: created (seeded from the home, then the import)")
            return
        SoulFile(soul_file, clock=clock).save(graph)
        report.changes.append(f"{SOUL_FILE}: created, seeded from the home")
    store = SoulFile(soul_file, clock=clock)
    graph = store.graph()
    plan = plan_memories(graph, report.origin, entries, "SOUL.md" in report.replaced, own)
    if report.check or not (plan.add or plan.supersede or plan.archive):
        _memory_report(plan, graph, report)  # nothing to write: the write lock is not even taken
        return
    with store.change() as graph:  # planned again under the lock: another writer may have been first
        plan = plan_memories(graph, report.origin, entries, "SOUL.md" in report.replaced, own)
        _memory_report(plan, graph, report)
        for entry in plan.add:
            _add(graph, entry, report)
        for old_id, entry in plan.supersede:
            new = _add(graph, entry, report)
            if new is None:
                continue
            if graph.get(old_id).pinned:
                graph.pin(old_id, False)  # a replaced axiom is no longer one
            lifecycle.supersede(graph, old_id, new, writer=WRITER, reason=f"changed in {report.commit[:12]}")
        for node_id in plan.archive:
            if graph.get(node_id).pinned:
                graph.pin(node_id, False)
            lifecycle.archive(graph, node_id, writer=WRITER, reason=f"not in the soul repo at {report.commit[:12]}")


def _memory_report(plan: MemoryPlan, graph: SoulGraph, report: Report) -> None:
    counts = report.memories
    counts.update(unchanged=plan.unchanged, already_known=plan.known, added=len(plan.add),
                  superseded=len(plan.supersede), archived=len(plan.archive))
    lines: list[str] = []  # the soul graph's part of the diff: - leaves default recall, + comes in
    if report.check:  # what the guard would flag, said before anything is written
        for entry in [*plan.add, *(entry for _old, entry in plan.supersede)]:
            try:
                found = guard.inspect(iter([("content", entry.content)]), f"{entry.path} #{entry.number}")
            except RefusedMemory:
                continue
            if entry.context:  # written beside flagged text of its file: flagged as the guard will
                found["context"] = entry.context
            if found:
                report.flagged.append({"id": None, "path": entry.path, "entry": entry.number,
                                       "rules": sorted({r for rules in found.values() for r in rules}),
                                       "pin_dropped": entry.pinned})
        counts["flagged"] = sum(1 for item in report.flagged if item["id"] is None)
    for entry in plan.add:
        report.changes.append(f"memory add: {entry.path} #{entry.number}: {_short(entry.content)}")
        lines.append(f"+{entry.path} #{entry.number}: {_short(entry.content)}")
    for old_id, entry in plan.supersede:
        report.changes.append(f"memory supersede {old_id} ({_short(graph.get(old_id).content)}) with "
                              f"{entry.path} #{entry.number}: {_short(entry.content)}")
        lines += [f"-{old_id} (superseded): {_short(graph.get(old_id).content)}",
                  f"+{entry.path} #{entry.number}: {_short(entry.content)}"]
    for node_id in plan.archive:
        report.changes.append(f"memory archive {node_id}: {_short(graph.get(node_id).content)}")
        lines.append(f"-{node_id} (archived): {_short(graph.get(node_id).content)}")
    if lines:
        report.diff += f"--- a/{SOUL_FILE} (memories)\n+++ b/{SOUL_FILE} (memories)\n" + "\n".join(lines) + "\n"


def _short(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def _first_provenance(typed: learned.Learned) -> dict[str, Any]:
    """Where a learned memory was learned, and (when it said) when what it says held."""
    found = dict(typed.provenance)
    found.update({name: value for name, value in (("valid_from", typed.valid_from), ("valid_to", typed.valid_to))
                  if value is not None})
    return found


def _add(graph: SoulGraph, entry: Entry, report: Report) -> str | None:
    typed = entry.learned
    more: dict[str, Any] = {}
    if typed is not None:  # kind, scope and the rest as learned; where it was learned in metadata.learned
        more = {"kind": typed.kind, "scope": typed.scope, "confidence": typed.confidence,
                "importance": typed.importance, "source_ref": typed.provenance.get("source_ref")}
    try:
        written = remember(graph, entry.content, entry.tags, writer=WRITER, pinned=entry.pinned,
                           **({"kind": "axiom" if entry.pinned else None} if typed is None else more),
                           source=f"import:{report.origin}@{report.commit}:{entry.path}",
                           where=f"{entry.path} #{entry.number}",
                           metadata={"import": {"origin": report.origin, "path": entry.path, "entry": entry.number,
                                                "commit": report.commit},
                                     **({learned.TAG: _first_provenance(typed)} if typed is not None else {}),
                                     **({guard.CONTEXT: {"rules": list(entry.context)}} if entry.context else {})})
    except RefusedMemory as exc:  # validate() scanned every file; the origin, commit or a path can still hold one
        report.memories["refused"] += 1
        report.warnings.append(str(exc))
        return None
    report.warnings.extend(written.warnings)
    rules = record.flagged(written.node.metadata)
    if rules:
        report.memories["flagged"] += 1
        report.flagged.append({"id": written.node.id, "path": entry.path, "entry": entry.number, "rules": list(rules),
                               "pin_dropped": entry.pinned and not written.node.pinned})
    return written.node.id
