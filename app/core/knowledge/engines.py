"""How a library's patterns are compiled for RE2: over raw log bytes (the Set, the engines
that locate hits) and over decoded lines (the engines that confirm them and read their groups).
"""

from __future__ import annotations

from typing import Any

import re2

from app.core.patterns.rewrites import frame_anchors, relaxed, utf8_bytes


def _re2_options(*, latin1: bool) -> Any:
    options = re2.Options()
    options.never_nl = True  # a pattern never spans two lines of a chunk
    options.max_mem = 64 << 20
    options.log_errors = False  # a bad pattern is reported as an issue, not on stderr
    if latin1:
        # Bytes as bytes, like `rg --no-unicode`: invalid UTF-8 in a log cannot hide a match.
        options.encoding = re2.Options.Encoding.LATIN1
    return options


SCAN = _re2_options(latin1=True)
# Each part of the library's Set (app.core.knowledge.screen.PART_PATTERNS patterns) keeps
# the states that 720 KB of failure text of every kind needs in under 32 MiB; this is room
# to spare, taken only as far as a log's states need it.
_TEXT = _re2_options(latin1=False)
# The raw engines only locate lines (groups are read on the decoded line): without
# captures RE2 need not work out submatches on every hit.
_LOCATE = _re2_options(latin1=True)
_LOCATE.never_capture = True


def scan_pattern(pattern: str, *, relax: bool = False) -> bytes:
    # (?m): ^ and $ work per line inside a chunk, as they do on a single line. A pattern
    # beyond ASCII is spelled in UTF-8 bytes, so that `.` and classes take whole characters.
    if not pattern.isascii():
        pattern = utf8_bytes(pattern)
    return ("(?m)" + (relaxed(pattern) if relax else frame_anchors(pattern))).encode("utf-8")


def compile_re2(pattern: str) -> Any:
    """Compile a pattern for RE2 (linear time) over raw log bytes, one line at a time."""
    return re2.compile(scan_pattern(pattern), _LOCATE)


def compile_loose(pattern: str) -> tuple[Any, Any] | None:
    """For a pattern with bounded repeats: the pattern with them opened and a Set of it alone.

    RE2 takes up to 12 us to find where a match of `[^)]{0,300}` starts, against 2 us for
    the opened pattern. The opened one (a superset) finds the next line that may hold a
    match; the Set of the exact pattern says whether the line does, without finding where
    (a forward scan, no backward one). None when the pattern has no bounded repeat.
    """
    exact, loose = scan_pattern(pattern), scan_pattern(pattern, relax=True)
    if loose == exact:
        return None
    line = re2.Set.SearchSet(_LOCATE)
    line.Add(exact)
    line.Compile()
    return re2.compile(loose, _LOCATE), line


def compile_text(pattern: str) -> Any:
    """Compile a pattern for RE2 over one decoded line (spans in characters)."""
    return re2.compile(pattern, _TEXT)
