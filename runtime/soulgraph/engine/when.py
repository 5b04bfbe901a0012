"""The time a question names: "on May 23, 2023", "in October 2023", "in June", "last May", "in 2022",
"in summer 2021", "early 2023", and a span counted from such a date: "the week before August 3, 2023", "two days after May 8".

`window(text, now)` finds the first such date and gives the span of time it covers, or None.
Search (engine/hybrid.py) then favours memories from that span. Only dates written out are
read: "last week" or "after the trip" depend on when the thing was said or on another
memory, and guessing them wrongly would push the right answer down (docs/embeddings.md).

A month without a year is its latest occurrence that has begun by `now` ("last May": that has
ended); a day without a year likewise. Times are UTC, as the graph's are.
"""

from __future__ import annotations

import calendar
import re
from datetime import datetime, timedelta, timezone

from soulgraph.engine.graph import DAY

_MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): number for number, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
# Most specific first: a day, then a month, then a year alone.
_PATTERNS = [
    ("day", re.compile(rf"\b{_MONTH}\s+{_DAY}(?:,\s*|\s+){_YEAR}\b", re.I)),   # May 23, 2023
    ("day", re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.I)),  # 23 May, 2023
    ("day", re.compile(rf"\b{_MONTH}\s+{_DAY}\b(?!\s*(?:,\s*)?\d)", re.I)),      # May 23
    ("month", re.compile(rf"\b{_MONTH},?\s+(?:of\s+)?{_YEAR}\b", re.I)),         # October 2023
    ("month", re.compile(rf"\b(?P<last>last)\s+{_MONTH}\b", re.I)),  # last May: never this month
    ("month", re.compile(rf"\b(?:in|during|of|since|until|by|early|late|mid)\s+(?:-\s*)?{_MONTH}\b", re.I)),  # in June
    ("season", re.compile(rf"\b(?P<season>spring|summer|autumn|fall),?\s+(?:of\s+)?{_YEAR}\b", re.I)),  # summer 2021
    ("year", re.compile(rf"\b(?:in|during|of|since|until|by|early|late|mid)[\s-]+{_YEAR}\b", re.I)),  # in 2022
]
# The months a season with a year covers, as the northern meteorological seasons count them. Winter
# is left out: "winter 2021" may mean the start of 2021 or its end, and a wrong span pushes the
# right answer down.
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9}


def _utc(year: int, month: int = 1, day: int = 1) -> float:
    return datetime(year, month, day, tzinfo=timezone.utc).timestamp()


def _month_span(year: int, month: int) -> tuple[float, float]:
    end = _utc(year + 1, 1) if month == 12 else _utc(year, month + 1)
    return _utc(year, month), end


_COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_UNIT_DAYS = {"day": 1, "night": 1, "week": 7, "weekend": 7, "fortnight": 14, "month": 31,
              **{name.lower(): 7 for name in calendar.day_name}}  # "the Sunday before": within a week
# What stands just before a date to count a span from it: "the week before", "two days after".
_RELATIVE = re.compile(r"\b(?:(?P<count>\d{1,2}|" + "|".join(_COUNTS) + r")\s+|the\s+|last\s+)?"
                       r"(?P<unit>" + "|".join(_UNIT_DAYS) + r")s?\s+(?P<way>before|after|prior\s+to|following)\s+"
                       r"(?:(?:on|the)\s+)?$", re.I)


def _counted(before: str, span: tuple[float, float]) -> tuple[float, float]:
    """The span a relative phrase ending `before` counts from the date's `span`, or the date's own."""
    found = _RELATIVE.search(before)
    if not found:
        return span
    count = found.group("count")
    count = int(count) if count and count.isdigit() else _COUNTS.get((count or "").lower(), 1)
    length = max(count, 1) * _UNIT_DAYS[found.group("unit").lower()] * DAY
    if found.group("way").lower().startswith(("before", "prior")):
        return span[0] - length, span[0]
    return span[1], span[1] + length


# Every pattern holds a month's name or a year: a text with neither (most) is passed at once.
_ANY = re.compile(rf"\b(?:{_MONTH}|{_YEAR})", re.I)


def window(text: str, now: float) -> tuple[float, float] | None:
    """(start, end) in epoch seconds of the date `text` names, end exclusive; None if none."""
    if not _ANY.search(text):
        return None
    today = datetime.fromtimestamp(now, timezone.utc)
    for unit, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            found = match.groupdict()
            month = _MONTHS.get((found.get("month") or "").lower().rstrip("."))
            year = int(found["year"]) if found.get("year") else None
            try:
                if unit == "year":
                    span = _utc(year), _utc(year + 1)
                elif unit == "season":
                    first = _SEASONS[found["season"].lower()]
                    span = _utc(year, first), _month_span(year, first + 2)[1]
                elif unit == "month":
                    if year is None:  # the latest such month that has begun ("last": and ended)
                        latest = month < today.month or (month == today.month and not found.get("last"))
                        year = today.year if latest else today.year - 1
                    span = _month_span(year, month)
                else:
                    day = int(found["day"])
                    if year is None:
                        year = today.year if (month, day) <= (today.month, today.day) else today.year - 1
                    start = datetime(year, month, day, tzinfo=timezone.utc)
                    span = start.timestamp(), (start + timedelta(days=1)).timestamp()
            except (ValueError, OverflowError):  # "February 30": not a date, look on
                continue
            return _counted(text[: match.start()], span)
    return None
