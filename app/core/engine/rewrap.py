"""A paste as the program printed it: lines a console hard-wrapped read rejoined, markdown marks
around a whole line dropped, a launcher's output tags repeated inside a line removed.

A Windows console (and some terminals and CI log viewers) breaks output at a fixed width: a
message longer than the window continues at column 0 of the next line, often mid-word
("device-side assert trigg" / "ered"), so no pattern sees it whole. In such a paste no line is
longer than the width and several are exactly as long as it.

The rejoined text goes on the first line of the run; the lines it was wrapped onto stay as
they were, so every line keeps its number and nothing a pattern saw before is lost. Only a
log small enough to be one chunk (a paste) is looked at: a file written by a program is not
wrapped by a console.

A paste copied from an issue's markdown keeps the emphasis or code marks its author put around a
line (`**Segmentation fault**`, `` `Killed` ``); they are not the program's output and would hide
the line from patterns anchored at its ends, so they are dropped (the line keeps its number).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass

from app.core.engine.prefixes import parse_prefixes

MIN_WIDTH = 60  # narrower "widths" are ordinary short lines
MAX_WIDTH = 250
MIN_WRAPPED = 2  # lines exactly as long as the width, for it to be a width at all
MAX_JOINED = 40  # lines one message may have been wrapped onto


@dataclass(frozen=True, slots=True)
class Rewrapped:
    data: bytes
    width: int  # the console's width, in characters
    joined: tuple[int, ...]  # 0-based indexes of the lines that now hold a rejoined message


# The start of a line a program wrote, not the rest of a wrapped one: a launcher's or logger's
# prefix (rank, host, time), a level, a traceback's parts, an exception's name, a capitalised
# word (a new sentence; the rest of a word broken mid-way is not capitalised), "prog: ...", and
# the lower-case lines the C++ runtime and glibc print when they abort a process ("terminate
# called after throwing", "  what():", "free(): invalid pointer", "double free or corruption").
_RECORD = re.compile(
    r"(?:terminate called |\s*what\(\): |(?:free|malloc|realloc|munmap_chunk)\(\): |double free or corruption"
    r"|\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d|[IWEF]\d{4} |\[|\(|(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\b"
    r"|Traceback \(|\s+File \"|\s+\^|[A-Za-z_][\w.]*(?:Error|Exception|Warning|Interrupt|Exit)\b"
    r"|[A-Z][a-z]+\b|[IWEF] [\w./-]+:\d+\]|[a-z][\w.-]*: \S|\w[\w.-]*:\d+:\d+ )"
)


def _continues(line: str, nxt: str) -> bool:
    """Whether a line can be the rest of the one above it: not the start of a record of its own,
    nor of one like it (lines of one template, such as progress lines, that happen to be as long
    as each other start with the same word)."""
    if not nxt.strip() or _RECORD.match(nxt) is not None or parse_prefixes(nxt).end != 0:
        return False
    word = nxt.split(" ", 1)[0]
    return not line.startswith(word + " ")


def _width(lines: list[str]) -> int | None:
    """The console width a paste was wrapped at: its longest line length, when several lines
    reach it exactly and at least one of them breaks mid-word onto a line that starts no record."""
    lengths = Counter(len(line) for line in lines if len(line) >= MIN_WIDTH)
    if not lengths:
        return None
    width = max(lengths)
    if not MIN_WIDTH <= width <= MAX_WIDTH or lengths[width] < MIN_WRAPPED:
        return None
    mid_word = any(
        len(line) == width and nxt and line[-1].isalnum() and nxt[0].isalnum() and _continues(line, nxt)
        for line, nxt in itertools.pairwise(lines)
    )
    return width if mid_word else None


def _filler(line: str) -> bool:
    """A rule or box line (=====, -----, |...|) that is as wide as the window by design."""
    stripped = line.strip()
    return len(set(stripped)) <= 2 or stripped.startswith(("|", "+", "│", "┃", "╭", "╰", "─"))


def rewrap(data: bytes) -> Rewrapped | None:
    """The log with each hard-wrapped message rejoined onto its first line, or None if it is not wrapped."""
    text = data.decode("utf-8", errors="replace")
    raw = text.split("\n")
    lines = [line.rstrip("\r") for line in raw]
    width = _width(lines)
    if width is None:
        return None
    out = list(raw)
    joined = []
    i = 0
    while i < len(lines) - 1:
        if len(lines[i]) != width or _filler(lines[i]):
            i += 1
            continue
        end = i  # the run goes on while its last line fills the width and the next one continues it
        while (
            end + 1 < len(lines)
            and end - i < MAX_JOINED
            and len(lines[end]) == width
            and _continues(lines[end], lines[end + 1])
        ):
            end += 1
        if end > i:
            out[i] = "".join(lines[i : end + 1]) + ("\r" if raw[i].endswith("\r") else "")
            joined.append(i)
        i = end + 1
    if not joined:
        return None
    return Rewrapped("\n".join(out).encode("utf-8"), width, tuple(joined))


# A whole line in bold or in code: `**text**`, `` `text` `` (not a rule of asterisks).
_MARKED = re.compile(
    rb"^([ \t]*)(?:\*\*(?=[^*\s])((?:(?!\*\*)[^\r\n])*[^*\s])\*\*|`([^`\r\n]+)`)([ \t]*\r?)$", re.MULTILINE
)


def unmark(data: bytes) -> bytes | None:
    """The paste with markdown's bold and code marks around whole lines dropped, or None if it has none."""
    if b"**" not in data and b"`" not in data:
        return None
    out, n = _MARKED.subn(lambda m: m[1] + (m[2] if m[2] is not None else m[3]) + m[4], data)
    return out if n else None


# Open MPI's "[1,3]<stderr>:" and horovodrun's "[3]<stderr>:", at a line's start and again inside it.
_TAGGED = re.compile(
    rb"^([^\n]*?)(\[\d{1,6}(?:,\d{1,6})?\]<(?:stdout|stderr|stddiag)>:)([^\n]*?\2[^\n]*)$", re.MULTILINE
)


@dataclass(frozen=True, slots=True)
class Untagged:
    data: bytes
    lines: tuple[int, ...]  # 0-based indexes of the lines that had a repeated tag removed


def untag(data: bytes) -> Untagged | None:
    """The paste with a launcher's output tag repeated inside a line removed, or None if none is."""
    if b">:" not in data:
        return None
    lines: list[int] = []
    counted, line = 0, 0  # newlines are counted from where the last count stopped: each byte once

    def drop(m: re.Match[bytes]) -> bytes:
        nonlocal counted, line
        line += data.count(b"\n", counted, m.start())
        counted = m.start()
        lines.append(line)
        return m[1] + m[2] + m[3].replace(m[2], b"")

    out = _TAGGED.sub(drop, data)
    return Untagged(out, tuple(lines)) if lines else None
