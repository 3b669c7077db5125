"""Query parsing for recall: entities, intent, time expressions (DESIGN.md section 5).

Time expressions ("last week", "上周", "in May 2023", "yesterday") are found and resolved by the
``dateparser`` library against the caller's reference time *in the caller's time zone*, then turned
into a half-open UTC window ``[start, end)`` covering the expression's period (day, week, month,
year). A cheap regular-expression prefilter skips the library for queries with no temporal cue,
since ``dateparser.search`` costs about 25 ms per query on these machines.

Entities use the shared rules of :mod:`hindsight.text`, plus Chinese words from the ``rjieba``
segmenter (jieba-rs) for CJK queries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateparser.date import DateDataParser
from dateparser.search import search_dates

from hindsight.text import entities as latin_entities
from hindsight.text import intent as text_intent

_TEMPORAL_CUE = re.compile(
    r"\b(yesterday|today|tomorrow|tonight|ago|last|next|this|past|week|weekend|month|year|decade|"
    r"since|before|after|during|monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    r"jan(uary)?|feb(ruary)?|mar(ch)?|apr(il)?|may|june?|july?|aug(ust)?|sep(t(ember)?)?|oct(ober)?|"
    r"nov(ember)?|dec(ember)?|(19|20)\d\d)\b|[昨今明前后上下本这去]\s*[天周月年]|星期|礼拜|\d+\s*[年月日号]",
    re.IGNORECASE,
)
_MUST_HAVE = re.compile(
    r"\d|yesterday|today|tomorrow|tonight|ago|week|month|year|monday|tuesday|wednesday|thursday|friday|"
    r"saturday|sunday|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|[天周月年]|星期|礼拜",
    re.IGNORECASE,
)
_RECENCY = re.compile(
    r"\b(latest|recent(ly)?|currently|current|now|nowadays|these days|still|anymore|most recent|last time)\b"
    r"|最近|目前|现在|当前|最新",
    re.IGNORECASE,
)
_CJK = re.compile(r"[\u4e00-\u9fff]")
_CJK_STOPWORDS = frozenset(
    (
        "最近",
        "目前",
        "现在",
        "当前",
        "最新",
        "什么",
        "怎么",
        "怎样",
        "哪里",
        "哪儿",
        "为什么",
        "我们",
        "你们",
        "他们",
        "她们",
        "这个",
        "那个",
        "时候",
        "还是",
        "是否",
        "有没有",
        "可以",
    )
)
_LANGUAGES = ["en", "zh"]


@dataclass(frozen=True)
class TimeWindow:
    """A resolved time expression: ``[start, end)`` in UTC, the matched ``text`` and its ``period``."""

    text: str
    start: datetime
    end: datetime
    period: str


@dataclass(frozen=True)
class ParsedQuery:
    """What recall understood of a query."""

    text: str
    entities: tuple[str, ...]
    intent: str
    window: TimeWindow | None
    """The first time expression, resolved; ``None`` if the query has none."""
    wants_recent: bool
    """The query asks for the current state ("latest", "now", "最近"): recency matters more."""


def zone(name: str | None) -> ZoneInfo:
    """The IANA zone ``name`` (``None`` -> UTC).

    Raises:
        ValueError: unknown or empty zone name (the message names it).
    """
    try:
        return ZoneInfo("UTC" if name is None else name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {name!r}; use an IANA name such as 'Asia/Shanghai'") from exc


def _period_window(moment: datetime, period: str) -> tuple[datetime, datetime]:
    """``[start, end)`` (naive local) of the day/week/month/year containing ``moment``."""
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "week":
        start = day - timedelta(days=day.weekday())
        return start, start + timedelta(days=7)
    if period == "month":
        start = day.replace(day=1)
        end = (
            start.replace(year=start.year + 1, month=1)
            if start.month == 12
            else start.replace(month=start.month + 1)
        )
        return start, end
    if period == "year":
        start = day.replace(month=1, day=1)
        return start, start.replace(year=start.year + 1)
    return day, day + timedelta(days=1)


def _resolve(span: str, parser: DateDataParser) -> tuple[str, datetime, str] | None:
    """Parse ``span``, dropping trailing words (``"last week in"`` -> ``"last week"``) until it parses."""
    words = span.split()
    candidates = [" ".join(words[:n]) for n in range(len(words), 0, -1)] if len(words) > 1 else [span]
    if _CJK.search(span):
        candidates += [span[:n] for n in range(len(span) - 1, 1, -1)]
    for text in candidates:
        if not _MUST_HAVE.search(text):
            continue
        data = parser.get_date_data(text)
        if data.date_obj is not None:
            return text, data.date_obj, data.period or "day"
    return None


def time_window(query: str, reference_time: datetime, time_zone: str | None = None) -> TimeWindow | None:
    """The first time expression of ``query`` as a UTC window, resolved in ``time_zone``.

    "yesterday" asked at 2026-11-29T23:30Z is 2026-11-28 in UTC but 2026-11-29 in Asia/Shanghai.

    Raises:
        ValueError: ``reference_time`` is naive, or ``time_zone`` is unknown.
    """
    if reference_time.utcoffset() is None:
        raise ValueError("reference_time must be timezone-aware")
    if not _TEMPORAL_CUE.search(query):
        return None
    tz = zone(time_zone)
    local_now = reference_time.astimezone(tz).replace(tzinfo=None)
    settings = {"RELATIVE_BASE": local_now, "PREFER_DATES_FROM": "past", "RETURN_TIME_AS_PERIOD": True}
    found = search_dates(query, languages=_LANGUAGES, settings=settings) or []
    parser = DateDataParser(languages=_LANGUAGES, settings=settings)
    for span, _ in found:
        if not _MUST_HAVE.search(span):
            continue  # dateparser reads words like "to" or "do" as dates: require a real cue
        resolved = _resolve(span, parser)
        if resolved is None:
            continue
        text, moment, period = resolved
        start, end = _period_window(moment, period)
        return TimeWindow(
            text,
            start.replace(tzinfo=tz).astimezone(ZoneInfo("UTC")),
            end.replace(tzinfo=tz).astimezone(ZoneInfo("UTC")),
            period,
        )
    return None


def query_entities(query: str) -> tuple[str, ...]:
    """Named entities (capitalised runs) plus, for Chinese, content words of two or more characters."""
    found = list(latin_entities(query))
    if _CJK.search(query):
        import rjieba  # noqa: PLC0415  (loads its dictionary; only for CJK queries)

        found += [
            w
            for w in rjieba.cut_for_search(query)
            if len(w) >= 2 and _CJK.search(w) and w not in _CJK_STOPWORDS and not _TEMPORAL_CUE.search(w)
        ]
    return tuple(dict.fromkeys(found))


def parse(query: str, reference_time: datetime, time_zone: str | None = None) -> ParsedQuery:
    """Parse ``query`` (see module doc).

    Raises:
        ValueError: naive ``reference_time`` or unknown ``time_zone`` (checked even when the query
            names no time).
    """
    zone(time_zone)
    return ParsedQuery(
        text=query,
        entities=query_entities(query),
        intent=text_intent(query),
        window=time_window(query, reference_time, time_zone),
        wants_recent=bool(_RECENCY.search(query)),
    )
