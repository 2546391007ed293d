"""Direct calls into RE2's compiled objects, without the `re2` module's wrapper.

The wrapper's `search()` copies a bytes argument and, for text, maps every offset
between UTF-8 and characters and builds a match object: about 20-50 µs a call, more
than the search itself on one log line. These helpers call the compiled regexp on
bytes or a memoryview and convert only the offsets they return.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import re2

_UNANCHORED = re2._Anchor.UNANCHORED


def find(compiled: Any, data: bytes | memoryview, pos: int = 0, end: int | None = None) -> int:
    """The offset of the first match in data[pos:end], or -1. No copy of data."""
    return int(compiled._regexp.Match(_UNANCHORED, data, pos, len(data) if end is None else end)[0][0])


class TextMatch(NamedTuple):
    """Where a pattern matched a line of text, in characters, and its named groups."""

    span: tuple[int, int]
    groups: dict[str, str]


def search_text(compiled: Any, text: str) -> TextMatch | None:
    """Search one line of text; spans and groups as characters of `text`."""
    data = text.encode("utf-8", errors="surrogatepass")
    spans = compiled._regexp.Match(_UNANCHORED, data, 0, len(data))
    if spans[0][0] < 0:
        return None
    ascii_only = len(data) == len(text)

    def chars(offset: int) -> int:
        return offset if ascii_only else len(data[:offset].decode("utf-8", errors="surrogatepass"))

    groups = {}
    for name, index in _group_names(compiled):
        start, stop = spans[index]
        if start >= 0:
            groups[name] = text[chars(start) : chars(stop)]
    return TextMatch((chars(spans[0][0]), chars(spans[0][1])), groups)


_GROUPS: dict[int, tuple[Any, tuple[tuple[str, int], ...]]] = {}


def _group_names(compiled: Any) -> tuple[tuple[str, int], ...]:
    """A compiled pattern's named groups and their indexes.

    The wrapper's `groupindex` asks RE2 and builds a new dict on every call: on a match-dense
    log that cost as much as the search. Patterns live as long as their library; the entry
    holds the pattern itself, so its id is never reused while the entry stands.
    """
    entry = _GROUPS.get(id(compiled))
    if entry is None or entry[0] is not compiled:
        names = tuple(
            (name.decode() if isinstance(name, bytes) else name, index) for name, index in compiled.groupindex.items()
        )
        entry = _GROUPS[id(compiled)] = (compiled, names)
        if len(_GROUPS) > 1 << 14:  # libraries loaded and dropped (tests, reloads): start over
            _GROUPS.clear()
    return entry[1]
