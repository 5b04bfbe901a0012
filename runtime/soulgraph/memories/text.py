"""What `python -m soulgraph.memories` prints without --json: one line per memory in a list,
a block for one memory, one line per audit entry."""

from __future__ import annotations

import shutil
from typing import Any


def _width() -> int:
    return max(60, min(shutil.get_terminal_size((100, 24)).columns, 160))


def _one_line(text: str, room: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= room else flat[:max(room - 1, 1)] + "…"


def memory_line(item: dict[str, Any]) -> str:
    marks = [item["kind"], item["scope"], (item["created_at"] or "")[:10]]
    marks += [word for word, on in (("pinned", item["pinned"]), (item["status"], item["status"] != "active"),
                                    ("flagged", "flagged" in item), ("hypothesis", item.get("hypothesis"))) if on]
    if "score" in item:
        marks.append(f"score {item['score']:.3f}")
    head = f"{item['id']:<7} " + "  ".join(marks)
    return f"{head}\n        {_one_line(item['content'], _width() - 8)}"


def memory_list(items: list[dict[str, Any]], total: int | None = None, what: str = "memories") -> str:
    if not items:
        return f"no {what}\n"
    lines = [memory_line(item) for item in items]
    if total is not None and total > len(items):
        lines.append(f"({len(items)} of {total}; --limit N shows more)")
    return "\n".join(lines) + "\n"


def memory_block(item: dict[str, Any]) -> str:
    out = [memory_line(item).split("\n")[0], ""]
    out += [f"  | {line}" for line in item["content"].splitlines() or [""]]
    out.append("")
    if item["tags"]:
        out.append(f"  tags        {', '.join(item['tags'])}")
    prov = item["provenance"]
    out.append(f"  source      {prov['source'] or '-'}" + (f" ({prov['source_ref']})" if prov.get("source_ref") else ""))
    out.append(f"  written by  {prov['writer'] or '-'}, first seen {prov['first_seen_at']}, "
               f"last confirmed {prov['last_confirmed_at']}")
    out.append(f"  confidence  {item['confidence']:.2f}   importance {item['importance']:.2f}   "
               f"strength now {item['strength']:.2f}   used {item['access_count']} time(s)")
    if item.get("flagged"):
        out.append(f"  flagged     {', '.join(item['flagged'])}: withheld from every prompt")
    if item["valid_to"] or item["valid_from"]:
        out.append(f"  valid       {item['valid_from'] or item['created_at']} to {item['valid_to'] or 'now'}")
    if item["superseded_by"]:
        out.append(f"  replaced by {item['superseded_by']}")
    if item["supersedes"]:
        out.append(f"  replaces    {', '.join(item['supersedes'])}")
    for word, links in (("built on", item["parents"]), ("built upon by", item["children"])):
        for link in links:
            text = "(gone)" if link["content"] is None else _one_line(link["content"], _width() - 30)
            out.append(f"  {word:<11} {link['id']}: {text}")
    if item["history"]:
        out.append("  history")
        out += [f"    {entry_line(entry)}" for entry in item["history"]]
    return "\n".join(out) + "\n"


def entry_line(entry: dict[str, Any]) -> str:
    extra = "".join(f" {key} {entry[key]}" for key in ("by", "merged", "into") if entry.get(key))
    reason = f": {entry['reason']}" if entry.get("reason") else ""
    scope = f" [{entry['scope']}]" if entry.get("scope") else ""
    return f"{entry['at']}  {entry['action']:<10} {entry['node']}{extra}{scope}  ({entry.get('writer') or '-'}){reason}"


def history(entries: list[dict[str, Any]]) -> str:
    if not entries:
        return "no audit entries\n"
    return "\n".join(entry_line(e) for e in entries) + "\n"


def change(report: dict[str, Any]) -> str:
    """A change's report, as one or two sentences."""
    if "edited" in report:
        line = f"{report['edited']} is superseded by {report['new']}, the edited version"
    elif "forgotten" in report:
        line = (f"{report['forgotten']} is forgotten: gone from every file; the audit keeps its id and the reason"
                if report["hard"] else f"{report['forgotten']} is archived: out of recall and prompts, kept "
                                         "(--hard removes it from every file)")
    elif "superseded_by" in report:
        line = f"{report['id']} is superseded by {report['superseded_by']}"
    elif "pinned" in report:
        state = "pinned" if report["pinned"] else "unpinned"
        line = f"{report['id']} is {state}" if report["changed"] else f"{report['id']} was {state} already; nothing changed"
    else:
        line = f"{report['id']} is {report['status']}"
    lines = [line]
    if report.get("markdown"):
        lines.append(f"  rewritten: {', '.join(report['markdown'])}")
    lines += [f"  warning: {w}" for w in report.get("warnings", ())]
    return "\n".join(lines) + "\n"
