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


# One character of text, as the raw bytes of a log may hold it: an ASCII byte, or a run of
# one to four bytes >= 0x80 (a UTF-8 sequence, or the invalid bytes one U+FFFD replaced).
_WIDE = r"(?:[\x80-\xff]{1,4})"
_ANY = r"(?:[^\n]|[\x80-\xff]{1,4})"
_BYTES_TOKEN = re.compile(
    r"\\[pP](?:\{[^}]*\}|.)"  # a Unicode class
    r"|\\x\{([0-9A-Fa-f]+)\}|\\x([0-9A-Fa-f]{2})"  # a character by its code
    r"|\\Q.*?(?:\\E|\Z)"  # quoted text
    r"|\\[SWD]|\\."  # a negated Perl class, or another escape
    r"|\[\^?\]?(?:\\.|\[:[a-z]+:\]|[^\]])*\]"  # a character class
    r"|\{(\d+),\d+\}|[$^.]|[^\x00-\x7f]",
    re.DOTALL,
)


def byte_superset(pattern: str) -> tuple[str, bool]:
    """A pattern for RE2 over raw bytes (Latin-1) that matches every line whose text the pattern matches.

    The text is the line decoded from UTF-8 (invalid bytes replaced) and split into frames;
    the bytes are the line as read. So: `^` and `$` also at a CR, bounded repeats opened,
    and each construct that matches one character of text also matches the one to four
    bytes >= 0x80 such a character is in the log (`.`, negated classes, non-ASCII literals).
    The second value tells whether, on a line of ASCII text with no CR, the result matches
    exactly where the pattern does: then a line it finds needs no confirming.

    Not covered: under `(?i)`, text's Unicode folding lets `k` match the Kelvin sign and `s`
    the long s (their bytes are E2 84 AA and C5 BF); a caller looks for those apart.
    """
    exact = True

    def token(m: re.Match[str]) -> str:
        nonlocal exact
        text = m[0]
        if text in _ANCHORS:
            return _ANCHORS[text]
        if text == ".":
            return r"(?:[^\x80-\xff\n]|[\x80-\xff]{1,4})"
        if m[3] is not None:  # a bounded repeat
            exact = False
            return f"{{{m[3]},}}"
        code = m[1] or m[2]
        if code is not None:
            return text if int(code, 16) < 0x80 else _WIDE
        if text.startswith(("\\p", "\\P")):
            exact = False
            return _ANY
        if text.startswith("\\Q"):
            body = text[2:].removesuffix("\\E")
            return "".join(_WIDE if ord(c) >= 0x80 else f"\\x{ord(c):02x}" for c in body)
        if text in ("\\S", "\\W", "\\D"):
            return f"(?:{text}|[\\x80-\\xff]{{1,4}})"
        if text.startswith("\\"):
            return text
        if text.startswith("["):
            inner = text[1:-1]
            if not inner.isascii() or "\\x{" in inner or re.search(r"\\[pP]|\\x[89a-fA-F]", inner):
                exact = False  # members beyond ASCII: any one character will do
                return _ANY
            return f"(?:{text}|[\\x80-\\xff]{{1,4}})" if text.startswith("[^") else text
        return _WIDE  # a non-ASCII literal: on ASCII text it matches nothing, as the pattern

    return _REPEATED_CHAR.sub(_repeated_char, _BYTES_TOKEN.sub(token, pattern)), exact


# One character of text as bytes (a byte of a class, or one to four bytes >= 0x80) repeated
# without a bound: any run of such bytes is a run of characters, so the class alone will do
# (over Latin-1 a negated class and \S, \W, \D match bytes >= 0x80 themselves). RE2 then
# builds fewer states, and the Set scans about 15 % faster.
_REPEATED_CHAR = re.compile(r"\(\?:(\[\^(?:\\.|[^\]\\])*\]|\\[SWD])\|\[\\x80-\\xff\]\{1,4\}\)(?=\{\d+,\}|[*+])")


def _repeated_char(m: re.Match[str]) -> str:
    return r"[^\n]" if m[1] in (r"[^\x80-\xff\n]", r"[^\n]") else m[1]


# UTF-8 as bytes: a character beyond ASCII (two to four bytes), and any one character.
_UTF8_WIDE = r"(?:[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3})"
_UTF8_CHAR = rf"(?:[^\x80-\xff]|{_UTF8_WIDE})"
_REPEAT = re.compile(r"[*+]|\{\d+,")  # a repeat that takes a run of characters, not one


def _utf8(text: str) -> str:
    """Characters as the bytes UTF-8 spells them, one group per character beyond ASCII."""
    return "".join(
        re.escape(c) if c.isascii() else "(?:" + "".join(f"\\x{b:02x}" for b in c.encode()) + ")" for c in text
    )


def _class_members(inner: str) -> tuple[str, list[str], bool]:
    """A class's ASCII part, its characters beyond ASCII, and whether a range or a Unicode
    class reaches beyond ASCII (then no list of characters says what it holds)."""
    ascii_part, wide, open_ended = [], [], False
    for m in re.finditer(r"\\[pP](?:\{[^}]*\}|.)|\\x\{([0-9A-Fa-f]+)\}|\\.|\[:[a-z]+:\]|(.)-(.)|.", inner, re.DOTALL):
        text = m[0]
        if text.startswith(("\\p", "\\P")) or (m[1] is not None and int(m[1], 16) >= 0x80):
            open_ended = True
        elif m[2] is not None and not (m[2].isascii() and m[3].isascii()):
            open_ended = True
        elif len(text) == 1 and not text.isascii():
            wide.append(text)
        else:
            ascii_part.append(text)
    return "".join(ascii_part), wide, open_ended


def utf8_bytes(pattern: str) -> str:
    """A pattern beyond ASCII, written for RE2 over raw bytes (Latin-1) the way UTF-8 spells its text.

    Over Latin-1, `.` and a class are one byte while a character of Chinese text is three:
    `[显内]存` would look for one of six bytes, and `..不足` could never match two Chinese
    characters before it. So each construct that stands for one character of text stands
    for one UTF-8 character of bytes: a literal for its bytes, a class for its ASCII members
    or the bytes of its other ones, `.` and a negated class for any one character. A run
    (`*`, `+`, `{m,}`) of `.` or of a negated class is a run of bytes already and is kept
    (a bound counts bytes, not characters). Where a class holds a range or a Unicode class
    beyond ASCII, any character beyond ASCII stands for it: a superset, which the decoded
    line confirms.
    """

    def token(m: re.Match[str]) -> str:
        text = m[0]
        run = bool(_REPEAT.match(pattern, m.end()))
        code = m[1] or m[2]
        if code is not None:
            return text if int(code, 16) < 0x80 else _utf8(chr(int(code, 16)))
        if text.startswith(("\\p", "\\P")):
            return _UTF8_CHAR
        if text.startswith("\\Q"):
            return _utf8(text[2:].removesuffix("\\E"))
        if text == "." or text in ("\\S", "\\W", "\\D"):
            return text if run else (_UTF8_CHAR if text == "." else f"(?:{text}|{_UTF8_WIDE})")
        if text.startswith("\\") or m[3] is not None or text in ("^", "$"):
            return text
        if text.startswith("["):
            negated = text.startswith("[^")
            ascii_part, wide, open_ended = _class_members(text[2 if negated else 1 : -1])
            if negated:
                if run:
                    return f"[^{ascii_part}]" if ascii_part else r"[^\n]"
                return rf"(?:[^{ascii_part}\x80-\xff]|{_UTF8_WIDE})"
            parts = [f"[{ascii_part}]"] if ascii_part else []
            parts += [_UTF8_WIDE] if open_ended else [_utf8(c) for c in wide]
            return "(?:" + "|".join(parts) + ")"
        return _utf8(text)  # a character beyond ASCII

    return _BYTES_TOKEN.sub(token, pattern)
