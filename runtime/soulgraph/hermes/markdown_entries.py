"""Split a Hermes memory or persona file into entries and the sections they sit in.

Hermes writes memory files as entries joined by a line holding only `§`; people write
SOUL.md (and edit memory files) as markdown. Both are read by one small parser:

- a line holding only `§` ends an entry, and the sections around it (each `§` entry
  stands on its own);
- a heading (`#` … `######`) opens a section; deeper headings nest inside it;
- a bullet (`-`, `*`, `+`, `1.`) is one entry; a more indented bullet is built on the
  bullet above it; indented lines right under a bullet continue it;
- any other run of non-blank lines is one entry (a paragraph);
- fenced code stays inside the entry it belongs to, uninterpreted.
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
    group: int = 0  # the stretch of the file it is in: a § separator, a heading, a rule or a list item starts the next


def parse_blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    headings: list[tuple[int, int]] = []  # (level, block index), outermost first
    bullets: list[tuple[int, int]] = []  # (indent, block index), outermost first
    open_block: int | None = None  # the entry that takes continuation lines
    in_fence: str | None = None

    def section() -> int | None:
        return headings[-1][1] if headings else None

    group = 0

    def start(kind: str, content: str, line: int, parent: int | None) -> int:
        blocks.append(Block(kind, content, line, parent, group))
        return len(blocks) - 1

    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if in_fence is not None:
            blocks[open_block].content += "\n" + line.rstrip()  # type: ignore[index]
            if stripped.startswith(in_fence):
                in_fence = None
            continue
        fence = FENCE.match(line)
        if fence:
            if open_block is None:
                open_block = start("entry", line.strip(), number, section())
            else:
                blocks[open_block].content += "\n" + line.rstrip()
            in_fence = fence.group(1)
            continue
        if stripped == ENTRY_SEPARATOR:
            group += 1
            headings.clear()
            bullets.clear()
            open_block = None
            continue
        if not stripped:
            open_block = None  # a blank line ends a paragraph; bullets may go on
            continue
        if RULE.match(line):
            group += 1
            open_block = None
            bullets.clear()
            continue
        heading = HEADING.match(line)
        if heading and heading.group(2):
            group += 1
            level = len(heading.group(1))
            while headings and headings[-1][0] >= level:
                headings.pop()
            index = start("section", heading.group(2), number, section())
            headings.append((level, index))
            bullets.clear()
            open_block = None
            continue
        bullet = BULLET.match(line)
        if bullet:
            group += 1  # a list item is an entry of its own
            indent = len(bullet.group(1).expandtabs(4))
            while bullets and bullets[-1][0] >= indent:
                bullets.pop()
            parent = bullets[-1][1] if bullets else section()
            open_block = start("entry", bullet.group(2).strip(), number, parent)
            bullets.append((indent, open_block))
            continue
        if open_block is not None:
            blocks[open_block].content += "\n" + stripped
            continue
        bullets.clear()  # a paragraph after a list stays in the last item's stretch: it may be its continuation
        open_block = start("entry", stripped, number, section())
    return blocks


def normalise(text: str) -> str:
    """The form two copies of one entry share: whitespace runs collapsed, ends trimmed."""
    return " ".join(text.split())
