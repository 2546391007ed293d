"""Log times without a year (glog, c10, torchrun, syslog) and how a job gives them one.

A year-less time is a `Yearless`: a `datetime` whose year is a placeholder (a leap year,
so 29 February parses) that is never shown. `year_resolver` builds, from the times of a
whole job, the function that gives each year-less time the year of the job's nearest
full-date time; with none, the year of when the log was written (its file's modification
time, when the caller knows it), else the times stay year-less and only the wrap of a job
across New Year is settled (December before the January that follows it).

In JSON a year-less time is written as ISO 8601's truncated form without a year (XML
Schema's `gMonthDay`): ``--12-01T03:14:21.618403``. Earlier releases wrote year 1900.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

PLACEHOLDER_YEAR = 2004  # a leap year whose preceding year is not: 29 February always fits
OLD_SENTINEL_YEAR = 1900  # what earlier releases stored for "no year"


class Yearless(datetime):
    """A log time whose year the log did not give; comparable only with other `Yearless`."""

    @classmethod
    def at(cls, month: int, day: int, hour: int, minute: int, second: int, micro: int = 0) -> Yearless:
        """The time in the placeholder year (ValueError for an impossible date)."""
        return cls(PLACEHOLDER_YEAR, month, day, hour, minute, second, micro)

    @classmethod
    def of(cls, value: datetime, year: int = PLACEHOLDER_YEAR) -> Yearless:
        """The month, day and clock of a datetime, its year dropped."""
        return cls(year, value.month, value.day, value.hour, value.minute, value.second, value.microsecond)

    @classmethod
    def parse(cls, text: str) -> Yearless:
        """Read the ``--MM-DDTHH:MM:SS[.ffffff]`` form (ValueError when it is not that)."""
        if not text.startswith("--"):
            raise ValueError(f"not a time without a year: {text!r}")
        return cls.of(datetime.fromisoformat(f"{PLACEHOLDER_YEAR}-{text[2:]}"))

    def with_year(self, year: int) -> datetime:
        """The full time in a given year (ValueError for 29 February of a common year)."""
        return datetime(year, self.month, self.day, self.hour, self.minute, self.second, self.microsecond)

    def isoformat(self, sep: str = "T", timespec: str = "auto") -> str:
        return "--" + super().isoformat(sep, timespec)[5:]

    def __str__(self) -> str:
        return self.isoformat(" ")

    def __repr__(self) -> str:
        return f"Yearless({self.isoformat()!r})"


# Facts (named captures) that measure how long the failing operation had been running when
# its line was printed: NCCL's "WorkNCCL(...) ran for 600021 milliseconds", gloo's "Timed out
# waiting 15000ms". Milliseconds per unit.
DURATION_FACTS = {"elapsed_ms": 1, "waited_ms": 1}


def began(printed: datetime | None, facts: dict[str, str]) -> datetime | None:
    """When a failure began, dated back from the duration its own line prints (None if it prints none)."""
    if printed is None:
        return None
    for name, unit in DURATION_FACTS.items():
        value = facts.get(name, "")
        if value.isdigit() and len(value) <= 12:  # at most ~30 years of milliseconds
            return printed - timedelta(milliseconds=int(value) * unit)
    return None


def span(seconds: float) -> str:
    """A duration as people say it: "9 min 48 s", "2 h 5 min", "850 ms"."""
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    total = round(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "min"), (secs, "s")]
    shown = [f"{n} {unit}" for n, unit in parts if n]
    return " ".join(shown[:2]) or "0 s"


def comparable(a: datetime, b: datetime) -> bool:
    """Whether two log times can be ordered: both with a year, or both without."""
    return isinstance(a, Yearless) == isinstance(b, Yearless)


def year_resolver(times: Iterable[datetime], written: datetime | None = None) -> Callable[[datetime], datetime]:
    """What each time of a job becomes once the job's full-date times lend it a year.

    With no full date in the job, `written` (when the log was last written, e.g. its file's
    modification time, in the same local time the log prints) gives each time the latest
    year that does not put it after the log was written.
    """
    full: list[datetime] = []
    yearless: set[tuple[int, int]] = set()
    for t in times:
        if isinstance(t, Yearless):
            yearless.add((t.month, t.day))
        else:
            full.append(t.replace(tzinfo=None) - (t.utcoffset() or timedelta(0)))
    if not yearless:
        return _same
    if full:
        return _nearest_full(sorted(full))
    if written is not None:
        return _before(written.replace(tzinfo=None) - (written.utcoffset() or timedelta(0)))
    return _wrapped(yearless)


def _same(t: datetime) -> datetime:
    return t


def _nearest_full(full: list[datetime]) -> Callable[[datetime], datetime]:
    years = sorted({y for f in full for y in (f.year - 1, f.year, f.year + 1)})
    cache: dict[Yearless, datetime] = {}

    def distance(t: datetime) -> timedelta:
        i = bisect.bisect_left(full, t)
        return min(abs(t - full[j]) for j in (i - 1, i) if 0 <= j < len(full))

    def resolve(t: datetime) -> datetime:
        if not isinstance(t, Yearless):
            return t
        if t not in cache:
            options = []
            for year in years:
                try:
                    options.append(t.with_year(year))
                except ValueError:  # 29 February of a common year
                    continue
            cache[t] = min(options, key=lambda o: (distance(o), o)) if options else t
        return cache[t]

    return resolve


# A log's clock and its file's may disagree a little (time zones, clock drift).
WRITTEN_SLACK = timedelta(days=1)


def _before(written: datetime) -> Callable[[datetime], datetime]:
    """Each year-less time in the latest year that keeps it before the log was written."""

    def resolve(t: datetime) -> datetime:
        if not isinstance(t, Yearless):
            return t
        for year in range(written.year, written.year - 8, -1):  # 29 February: the last leap year
            try:
                full = t.with_year(year)
            except ValueError:
                continue
            if full <= written + WRITTEN_SLACK:
                return full
        return t

    return resolve


def _wrapped(days: set[tuple[int, int]]) -> Callable[[datetime], datetime]:
    """With no year anywhere: a job that crosses New Year keeps its December first."""
    ordinals = sorted(Yearless.at(m, d, 0, 0, 0).timetuple().tm_yday for m, d in days)
    gaps = [(b - a, a) for a, b in zip(ordinals, ordinals[1:], strict=False)]
    wrap_gap = ordinals[0] + 366 - ordinals[-1]
    widest, after = max(gaps, default=(0, 0))
    if widest <= wrap_gap:
        return _same
    # The job runs from the day after the widest gap to the end of the year, then wraps:
    # the days up to `after` belong to the next year.
    start_of_next = after

    def resolve(t: datetime) -> datetime:
        if isinstance(t, Yearless) and t.timetuple().tm_yday > start_of_next:
            return Yearless.of(t, PLACEHOLDER_YEAR - 1) if (t.month, t.day) != (2, 29) else t
        return t

    return resolve
