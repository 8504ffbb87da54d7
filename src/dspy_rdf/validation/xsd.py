"""XSD 1.1's reading of the literals the shapes constrain, for the pySHACL engine.

rdflib reads literals with Python's types, which take forms XSD refuses (``int("1_000")``, a ``+14:01`` zone) and refuse
values XSD takes (year 10000 or 0, ``24:00:00``, nanoseconds: a ``datetime`` keeps microseconds). The fast engine reads
them as XSD does (Oxigraph implements XSD 1.1), so the pySHACL engine is given XSD's reading: a form XSD refuses is
marked ill-typed (``sh:datatype`` then reports it, and a comparison with it is an error, as in SPARQL), and a date or
dateTime carries an exact value compared by XSD's order, where a value without a zone and one with a zone less than 14
hours apart are neither before nor after each other.

The grammars here are written from XSD 1.1 Part 2 (3.3.2 boolean, 3.3.3 decimal, 3.4.13 integer, 3.3.7 dateTime,
3.3.9 date); the fast engine uses the date and time ones to find the valid values beyond its store's range.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from fractions import Fraction

__all__ = ["DATE_LEXICAL", "DATE_TIME_LEXICAL", "XsdDate", "XsdDateTime", "xsd_reading"]

_XSD = "http://www.w3.org/2001/XMLSchema#"

# Plain groups and [.] only: the fast engine puts these in SPARQL's REGEX (XPath's syntax, in a SPARQL string)
_YEAR = r"-?([1-9][0-9]{3,}|0[0-9]{3})"
_MONTH_DAY = r"-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
_ZONE = r"(Z|[+-]((0[0-9]|1[0-3]):[0-5][0-9]|14:00))"
DATE_TIME_LEXICAL = _YEAR + _MONTH_DAY + r"T(([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]([.][0-9]+)?|24:00:00([.]0+)?)" + _ZONE + "?"
"""The lexical space of xsd:dateTime, but for the day's range in its month (a regular expression cannot say it)."""
DATE_LEXICAL = _YEAR + _MONTH_DAY + _ZONE + "?"
"""The lexical space of xsd:date, but for the day's range in its month."""

_DATE_TIME = re.compile(
    r"(?P<year>-?[0-9]+)-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})"
    r"T(?P<hour>[0-9]{2}):(?P<minute>[0-9]{2}):(?P<second>[0-9]{2}(?:\.[0-9]+)?)(?P<zone>.*)",
    re.ASCII,
)
_DATE = re.compile(r"(?P<year>-?[0-9]+)-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})(?P<zone>.*)", re.ASCII)
_GRAMMAR = {
    _XSD + "dateTime": re.compile(DATE_TIME_LEXICAL, re.ASCII),
    _XSD + "date": re.compile(DATE_LEXICAL, re.ASCII),
    **{_XSD + name: re.compile(r"[+-]?[0-9]+", re.ASCII) for name in (
        "integer", "nonNegativeInteger", "positiveInteger", "nonPositiveInteger", "negativeInteger", "long", "int",
        "short", "byte", "unsignedLong", "unsignedInt", "unsignedShort", "unsignedByte",
    )},
    _XSD + "decimal": re.compile(r"[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)", re.ASCII),
    _XSD + "boolean": re.compile(r"true|false|1|0"),
}  # fmt: skip
_FOURTEEN_HOURS = 14 * 3600


def _leap(year: int) -> bool:
    """XSD 1.1 counts years as the proleptic Gregorian calendar does, year 0 (1 BCE) included: 0 and -4 are leap."""
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if _leap(year) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _days_from_epoch(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to the given day of the proleptic Gregorian calendar, at any year (Hinnant's algorithm)."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def _zone_seconds(zone: str) -> int | None:
    if not zone:
        return None
    if zone == "Z":
        return 0
    sign = -1 if zone[0] == "-" else 1
    return sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)


class _Moment:
    """A point on XSD's time line: seconds from the epoch, exactly, at UTC when it has a zone, as written when not."""

    __slots__ = ()
    seconds: Fraction
    zoned: bool

    def _bounds(self) -> tuple[Fraction, Fraction]:
        """Earliest and latest UTC moment it may be: a value without a zone lies anywhere from -14:00 to +14:00."""
        if self.zoned:
            return self.seconds, self.seconds
        return self.seconds - _FOURTEEN_HOURS, self.seconds + _FOURTEEN_HOURS

    def _order(self, other: object) -> int | None:
        """-1, 0 or 1 by XSD's order; None where XSD's order is indeterminate or ``other`` is no moment."""
        if not isinstance(other, _Moment):
            return None
        if self.zoned == other.zoned:
            return (self.seconds > other.seconds) - (self.seconds < other.seconds)
        (low, high), (other_low, other_high) = self._bounds(), other._bounds()
        if high < other_low:
            return -1
        if low > other_high:
            return 1
        return None

    def __lt__(self, other: object) -> bool:
        return self._order(other) == -1

    def __gt__(self, other: object) -> bool:
        return self._order(other) == 1

    def __le__(self, other: object) -> bool:
        return self._order(other) in (-1, 0)

    def __ge__(self, other: object) -> bool:
        return self._order(other) in (0, 1)

    def __eq__(self, other: object) -> bool:
        return self._order(other) == 0

    def __ne__(self, other: object) -> bool:
        return self._order(other) in (-1, 1)

    def __hash__(self) -> int:
        return hash((self.seconds, self.zoned))


class XsdDateTime(_Moment, datetime):
    """An xsd:dateTime value, exact at any year and any fraction of a second, ordered as XSD orders dateTimes.

    It is a ``datetime`` (pySHACL's ``sh:datatype`` check asks for one) whose fields are the value's where Python can
    hold it (to the microsecond), and the epoch where it cannot; comparisons use the exact value."""

    __slots__ = ("seconds", "zoned")


class XsdDate(_Moment, date):
    """An xsd:date value, compared as XSD compares dates (the first moment of the day, in its zone if it has one)."""

    __slots__ = ("seconds", "zoned")


class _NotAValue:
    """The value of an ill-typed date or dateTime: no comparison with it holds, as SPARQL makes every comparison
    with an ill-typed literal an error (rdflib compares such literals by their text)."""

    __slots__ = ()

    def __lt__(self, other: object) -> bool:
        return False

    __gt__ = __le__ = __ge__ = __eq__ = __lt__

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = object.__hash__


NOT_A_VALUE = _NotAValue()


def _day(match: re.Match[str]) -> tuple[int, int, int] | None:
    """The year, month and day a date or dateTime form names, None when that day is not in its month."""
    year, month, day = int(match["year"]), int(match["month"]), int(match["day"])
    return None if day > _days_in_month(year, month) else (year, month, day)


def _date_time(text: str) -> XsdDateTime | None:
    match = _DATE_TIME.fullmatch(text)
    if match is None or (found := _day(match)) is None:
        return None
    year, month, day = found
    hour, minute, second = int(match["hour"]), int(match["minute"]), Fraction(match["second"])
    zone = _zone_seconds(match["zone"])
    seconds = _days_from_epoch(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - (zone or 0)
    try:
        whole = int(second)
        shown = datetime.__new__(XsdDateTime, year, month, day, hour, minute, whole, int((second - whole) * 1_000_000))
    except (ValueError, OverflowError):  # beyond Python's years, or 24:00:00
        shown = datetime.__new__(XsdDateTime, 1970, 1, 1)
    shown.seconds, shown.zoned = seconds, zone is not None
    return shown


def _date(text: str) -> XsdDate | None:
    match = _DATE.fullmatch(text)
    if match is None or (found := _day(match)) is None:
        return None
    year, month, day = found
    zone = _zone_seconds(match["zone"])
    try:
        shown = date.__new__(XsdDate, year, month, day)
    except (ValueError, OverflowError):  # beyond Python's years
        shown = date.__new__(XsdDate, 1970, 1, 1)
    shown.seconds, shown.zoned = Fraction(_days_from_epoch(year, month, day) * 86400 - (zone or 0)), zone is not None
    return shown


_VALUE = {_XSD + "dateTime": _date_time, _XSD + "date": _date}


def xsd_reading(text: str, datatype: str) -> tuple[bool, object] | None:
    """XSD's reading of a literal where it differs from rdflib's: (well-typed, value to compare by, or None to keep
    rdflib's value); None for a datatype read as rdflib reads it."""
    grammar = _GRAMMAR.get(datatype)
    if grammar is None:
        return None
    if not grammar.fullmatch(text):
        return False, NOT_A_VALUE if datatype in _VALUE else None
    if datatype not in _VALUE:
        return True, None
    value = _VALUE[datatype](text)
    return (False, NOT_A_VALUE) if value is None else (True, value)
