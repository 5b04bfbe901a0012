"""Split a Hermes memory or persona file into entries and the sections they sit in.

Hermes writes memory files as entries joined by a line holding only `§`; people write
SOUL.md (and edit memory files) as markdown. Both are read by one small parser:

- a line holding only `§` ends an entry, and the sections around it (each `§` entry
  stands on its own);
- a heading (`#` … `######`) opens a section; deeper headings nest inside it;
- a bullet (`-`, `*`, `+`, `1.`) is one entry; a more indented bullet is built on the
  bullet above it; indented lines right under a bullet continue it;
- any other run of non-blank lines is one entry (a paragraph);
- fenced code stays inside the entry it belongs to, uninterpreted (up to its closing fence,
  or a `§` line: Hermes splits there, inside a fence too).

For the write guard, `stretches` says which blocks are judged together and how far a
flagged one's taint runs (see there): an injection that carries markdown structure of its
own (a heading, a list, a code fence) is not let in a piece at a time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
BULLET = re.compile(r"^([ \t]*)(?:[-*+]|\d{1,9}[.)])[ \t]+(\S.*)$")
RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
FENCE = re.compile(r"^ {0,3}(```|~~~)")
ENTRY_SEPARATOR = "§"


@dataclass
class Block:
    kind: str  # "section" (a heading) or "entry"
    content: str
    line: int  # 1-based line where it starts
    parent: int | None  # index of the enclosing block in the list, if any
    # The stretch of the file it is in: a § separator, a rule, a list item or a heading starts
    # the next; a heading or a rule does not when it comes right under text (no blank line
    # before it) or sits indented inside a list item: it is part of that text.
    group: int = 0
    level: int = 0  # a section's heading level (1-6); 0 for an entry
    entry: int = 0  # which § entry of the file it is in (0 before the first separator)
    end: int = 0  # 1-based line where it ends
    list: int | None = None  # the list it is an item of (an entry made by a bullet), if any


def parse_blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    headings: list[tuple[int, int]] = []  # (level, block index), outermost first
    bullets: list[tuple[int, int]] = []  # (indent, block index), outermost first
    open_block: int | None = None  # the entry that takes continuation lines
    in_fence: str | None = None

    def section() -> int | None:
        return headings[-1][1] if headings else None

    group = 0
    entry = 0
    # For the stretches only (the blocks' structure does not depend on them): the text the
    # line before belongs to (None after a blank line), the column a line must reach to sit
    # inside the last list item, and the list that item belongs to.
    last_text: int | None = None
    item_column: int | None = None
    lists = 0
    current_list: int | None = None

    def start(kind: str, content: str, line: int, parent: int | None, level: int = 0) -> int:
        blocks.append(Block(kind, content, line, parent, group, level, entry, line))
        return len(blocks) - 1

    def grow(index: int, more: str, line: int) -> None:
        blocks[index].content += "\n" + more
        blocks[index].end = line

    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        indent = len(line[:len(line) - len(line.lstrip())].expandtabs(4))
        if in_fence is not None and stripped == ENTRY_SEPARATOR:
            in_fence = None  # Hermes splits its files at a `§` line, whatever it stands in: so does this parser
        if in_fence is not None:
            grow(open_block, line.rstrip(), number)  # type: ignore[arg-type]
            if stripped.startswith(in_fence):
                in_fence = None
            last_text = open_block
            continue
        fence = FENCE.match(line)
        if fence:
            if open_block is None:
                open_block = start("entry", line.strip(), number, section())
            else:
                grow(open_block, line.rstrip(), number)
            in_fence = fence.group(1)
            last_text = open_block
            continue
        if stripped == ENTRY_SEPARATOR:
            group += 1
            entry += 1
            headings.clear()
            bullets.clear()
            open_block = last_text = item_column = current_list = None
            continue
        if not stripped:
            open_block = None  # a blank line ends a paragraph; bullets may go on
            last_text = None
            continue
        if RULE.match(line):
            if last_text is None and not (item_column is not None and indent >= item_column):
                group += 1  # one right under text (its setext underline) or inside an item is part of it
                item_column = current_list = None
            open_block = last_text = None
            bullets.clear()
            continue
        heading = HEADING.match(line)
        if heading and heading.group(2):
            inside_item = item_column is not None and indent >= item_column
            if last_text is None and not inside_item:
                group += 1  # a heading of the file's own; one that interrupts text, or sits in an item, is part of it
                item_column = current_list = None
            level = len(heading.group(1))
            while headings and headings[-1][0] >= level:
                headings.pop()
            index = start("section", heading.group(2), number, section(), level)
            headings.append((level, index))
            bullets.clear()
            open_block = None
            last_text = index
            continue
        bullet = BULLET.match(line)
        if bullet:
            group += 1  # a list item is an entry of its own
            indent = len(bullet.group(1).expandtabs(4))
            while bullets and bullets[-1][0] >= indent:
                bullets.pop()
            parent = bullets[-1][1] if bullets else section()
            if current_list is None:
                lists += 1
                current_list = lists
            open_block = start("entry", bullet.group(2).strip(), number, parent)
            blocks[open_block].list = current_list
            bullets.append((indent, open_block))
            item_column = len(line) - len(bullet.group(2)) if "\t" not in line else indent + 2
            last_text = open_block
            continue
        if open_block is not None:
            grow(open_block, stripped, number)
            last_text = open_block
            continue
        if item_column is not None and indent == 0:
            item_column = current_list = None  # text at the margin ends the list (it stays in the last item's stretch)
        bullets.clear()  # a paragraph after a list stays in the last item's stretch: it may be its continuation
        open_block = start("entry", stripped, number, section())
        last_text = open_block
    return blocks


@dataclass
class Stretch:
    """Blocks of a file the write guard judges together (`blocks`, judged as one text too when
    `whole`), and the blocks a flag on any of them taints (`reach`, which holds `blocks`)."""

    blocks: list[int]
    whole: bool
    reach: list[int]


def stretches(blocks: list[Block], writes: bool = False) -> list[Stretch]:
    """How far the taint of a flagged block runs, for a file parsed by `parse_blocks`
    (`writes`: the file is one of Hermes' memory files, whose `§` entries are each one write of
    its memory tool):

    - a stretch (`Block.group`: a `§` entry, a list item with the paragraphs after it, a
      heading with the paragraphs under it) is flagged as a whole when any block of it is;
      one that holds a heading after its first block (a heading that interrupted text, or one
      indented inside a list item: markdown structure of the text's own) is also judged as
      one text (a rule right under text or inside an item stays in its stretch too);
    - the items of one list (and their nested items) go together, and with the paragraph the
      list interrupts (no blank line between);
    - from a flagged stretch the taint runs on through the rest of the section it sits in:
      up to the next heading of the same or a higher level than that section's, or to the
      end of the `§` entry (or of the file) when it sits under none, or when it holds a
      heading of its own (where the text it came in with ends is then unknown);
    - a fenced code block is in the stretch it sits in (it never starts one), and nothing
      passes a `§` separator;
    - in a Hermes memory file that has `§` separators (`writes`), a flagged stretch taints its
      whole `§` entry, the text before it too: the entry was written at once.
    """
    if not blocks:
        return []
    # The stretches (groups), each with the groups it goes with (a union of lists).
    top: dict[int, int] = {}

    def find(group: int) -> int:
        while top.setdefault(group, group) != group:
            top[group] = top[top[group]]
            group = top[group]
        return group

    def join(a: int, b: int) -> None:
        top[find(a)] = find(b)

    first_of_list: dict[int, int] = {}
    for at, block in enumerate(blocks):
        find(block.group)
        if block.list is not None:
            opener = first_of_list.setdefault(block.list, block.group)
            join(block.group, opener)
            before = blocks[at - 1] if at else None
            if (before is not None and opener == block.group and before.kind == "entry" and before.list is None
                    and before.end == block.line - 1 and before.entry == block.entry):
                join(block.group, before.group)  # a list that interrupts a paragraph goes with it
    units: dict[int, list[int]] = {}
    for at, block in enumerate(blocks):
        units.setdefault(find(block.group), []).append(at)
    by_entry: dict[int, list[int]] = {}
    if writes and any(block.entry for block in blocks):
        for at, block in enumerate(blocks):
            by_entry.setdefault(block.entry, []).append(at)
    found: list[Stretch] = []
    for members in units.values():
        first, last, inside = members[0], members[-1], set(members)
        by_group: dict[int, list[int]] = {}
        for at in members:
            by_group.setdefault(blocks[at].group, []).append(at)
        own_heading = any(blocks[at].kind == "section" and at != group[0]
                          for group in by_group.values() for at in group)
        # The level of the section the stretch sits in: its own first heading, else the one above it.
        under = blocks[first]
        while under.kind != "section" and under.parent is not None:
            under = blocks[under.parent]
        level = under.level if under.kind == "section" and not own_heading else 0
        end = last + 1
        while end < len(blocks) and blocks[end].entry == blocks[first].entry and not (
                level and blocks[end].kind == "section" and blocks[end].level <= level and end not in inside):
            end += 1
        tainted = inside | set(range(first, end))
        if by_entry:
            tainted |= set(by_entry[blocks[first].entry])
        reach = sorted(tainted)
        for group in by_group.values():
            whole = any(blocks[at].kind == "section" and at != group[0] for at in group)
            found.append(Stretch(group, whole, reach))
    return found


def normalise(text: str) -> str:
    """The form two copies of one entry share: whitespace runs collapsed, ends trimmed."""
    return " ".join(text.split())
