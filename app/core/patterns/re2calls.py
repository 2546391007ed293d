"""Direct calls into RE2's compiled objects, without the `re2` module's wrapper.

The wrapper's `search()` copies a bytes argument and, for text, maps every offset
between UTF-8 and characters and builds a match object: about 20-50 µs a call, more
than the search itself on one log line. These helpers call the compiled regexp on
bytes or a memoryview and convert only the offsets they return.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any, NamedTuple, cast

import re2

UNANCHORED: Any = re2._Anchor.UNANCHORED


def find(compiled: Any, data: bytes | memoryview, pos: int = 0, end: int | None = None) -> int:
    """The offset of the first match in data[pos:end], or -1. No copy of data."""
    return int(compiled._regexp.Match(UNANCHORED, data, pos, len(data) if end is None else end)[0][0])


Spans = Callable[[Any, bytes | memoryview, int, int], list[tuple[int, int]]]


def spans_of(compiled: Any) -> Spans:
    """The compiled regexp's own match, for a loop that calls it per hit: `find` without
    a Python call around it. Call it with `UNANCHORED`; [0][0] of what it returns is `find`'s."""
    return cast(Spans, compiled._regexp.Match)


def set_matcher(compiled_set: Any) -> Callable[[bytes | memoryview], list[int]]:
    """A Set's match: the indices of the patterns that match (empty if none), without the wrapper's call.

    A Set in parts (`app.core.knowledge.screen.SetParts`) has its own `match` that does this."""
    own = getattr(compiled_set, "match", None)
    return cast(Callable[[bytes | memoryview], list[int]], own if own is not None else compiled_set._set.Match)


class TextMatch(NamedTuple):
    """Where a pattern matched a line of text, in characters, and its named groups."""

    span: tuple[int, int]
    groups: dict[str, str]


def search_text(compiled: Any, text: str) -> TextMatch | None:
    """Search one line of text; spans and groups as characters of `text`."""
    data = text.encode("utf-8", errors="surrogatepass")
    spans = compiled._regexp.Match(UNANCHORED, data, 0, len(data))
    if spans[0][0] < 0:
        return None
    ascii_only = len(data) == len(text)

    def chars(offset: int) -> int:
        return offset if ascii_only else len(data[:offset].decode("utf-8", errors="surrogatepass"))

    groups = {}
    for name, index in _group_index(compiled):
        start, stop = spans[index]
        if start >= 0:
            groups[name] = text[chars(start) : chars(stop)]
    return TextMatch((chars(spans[0][0]), chars(spans[0][1])), groups)


@lru_cache(maxsize=8192)
def _group_index(compiled: Any) -> tuple[tuple[str, int], ...]:
    """A pattern's named groups: the wrapper's `groupindex` builds a new dict on every call."""
    return tuple((n.decode() if isinstance(n, bytes) else n, i) for n, i in compiled.groupindex.items())
