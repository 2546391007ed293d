"""Rewrites of library patterns for the fast pass: frame anchors and open repeats.

One tokenizer pass (the stdlib `re`, in C) tells escapes, character classes, bounded
repeats and anchors apart, so a `^` inside `[^x]` or an escaped `\\{` is never touched.
"""

from __future__ import annotations

import re

# An escape, a class (a leading ] or ^] is literal, [:alpha:] may sit inside), a bounded
# repeat, an anchor. Anything else is copied as is.
_TOKEN = re.compile(r"\\.|\[\^?\]?(?:\\.|\[:[a-z]+:\]|[^\]])*\]|\{(\d+),\d+\}|[$^]", re.DOTALL)
_ANCHORS = {"^": r"(?:^|\r)", "$": r"(?:$|\r)"}


def _rewrite(pattern: str, *, anchors: bool, relax: bool) -> str:
    def token(m: re.Match[str]) -> str:
        text = m[0]
        if text in _ANCHORS:
            return _ANCHORS[text] if anchors else text
        if m[1] is not None:
            return f"{{{m[1]},}}" if relax else text
        return text

    return _TOKEN.sub(token, pattern)


def frame_anchors(pattern: str) -> str:
    """The pattern with `^` and `$` also matching at a carriage return.

    A progress bar redraws itself with a lone CR, so a physical line holds several frames
    and a frame may start after a CR. Scanning the raw bytes with these anchors finds every
    line some frame of which matches (a superset: `.` may also run across a CR); the
    matcher confirms such lines frame by frame. Raw bytes need no translated copy.
    """
    return _rewrite(pattern, anchors=True, relax=False)


def open_repeats(pattern: str) -> str:
    """The pattern with every bounded repeat `{m,n}` opened to `{m,}`: it matches a superset.

    RE2 builds one automaton state per counted repetition (each `.{0,200}` is 200 of
    them): a prefilter that only says where the exact pattern may match scans about
    1.5x faster without the bound, and compiles in a fraction of the time.
    """
    return _rewrite(pattern, anchors=False, relax=True)


def relaxed(pattern: str) -> str:
    """`frame_anchors` and `open_repeats` at once: what the library's Set scans with."""
    return _rewrite(pattern, anchors=True, relax=True)
