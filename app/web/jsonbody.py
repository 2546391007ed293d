"""Read a JSON upload as it arrives, never holding the log whole.

`{"log": "..."}` can be hundreds of MiB: its string is decoded piece by piece into a spool file
and counted against the caller's limit on the decoded text, so an oversized log is refused as soon
as it passes the limit. `{"excerpt": [...]}` entries are checked one by one; their text goes to the
spool file and only their line numbers stay in memory. Every other field is small and bounded.
"""

from __future__ import annotations

import codecs
import json
import re
import tempfile
from array import array
from collections.abc import Callable
from typing import Any, BinaryIO

from pydantic import ValidationError

from app.core.selection import MAX_TEXT
from app.errors import Invalid, TooLarge
from app.web.sizes import human_bytes
from app.web.upload_fields import EXPECTED, ExcerptBody, ExcerptLine, JsonOptions, invalid, malformed

SPOOL_MEMORY = 1 << 20  # decoded text stays in memory up to this size, then goes to a temporary file
SMALL_VALUE = 64 << 10  # JSON text of any field but `log` and `excerpt`
ENTRY_VALUE = 6 * MAX_TEXT + 1024  # one excerpt entry, its text escaped as \uXXXX throughout
MAX_EXCERPT_LINES = 200_000  # the browser keeps a few thousand lines of even a 300 MB log
MAX_EXCERPT_BYTES = 16 << 20  # text of an excerpt (the tier's limit when that is smaller)

_WS = re.compile(r"[ \t\n\r]*")
# A run of a JSON string's content: plain characters or whole escapes (stops at the quote, a control
# character, a bad or incomplete escape, or the end of what has arrived). Linear: the alternatives
# start with different characters. Possessive (`*+`): a plain `*` over a group makes `re` keep a
# backtracking record per repetition, about 60 bytes per escape, so a log string of `\\\\` escapes held
# some 30 MiB per request being read, and the heap kept it afterwards (issue #38).
_RUN = re.compile(r'(?:[^"\\\x00-\x1f]+|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*+')
_HIGH_SURROGATE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}$")
_NEED = object()


def _matched_to(pattern: re.Pattern[str], buf: str, pos: int) -> int:
    """Where a pattern that also matches the empty string stops matching at `pos`."""
    m = pattern.match(buf, pos)
    assert m is not None  # a `*` pattern always matches
    return m.end()


class JsonBody:
    """A push parser for one JSON upload: feed it text as it arrives, then `finish()`.

    The top level must be an object. `log` (a string) is decoded into `file` as UTF-8;
    `excerpt` (an array) is read entry by entry. Raises `TooLarge` as soon as the decoded
    log passes `limit`, `BadInput` for malformed JSON and `Invalid` for wrong fields.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.file = spool()  # closed by the Upload
        self.size = 0  # decoded bytes written to file
        self.fields: dict[str, Any] = {}
        self.excerpt: ExcerptBody | None = None
        self._decode = codecs.getincrementaldecoder("utf-8")("replace")
        self._json = json.JSONDecoder()
        self._buf = ""
        self._state = "start"
        self._key = ""
        self._wait_for = 0  # buffer length worth another try at an incomplete value
        self._previous = 0

    # --- input -----------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Parse what has arrived (blocking: run it in a worker thread)."""
        self._buf += self._decode.decode(data)
        if len(self._buf) >= self._wait_for:
            self._run(eof=False)

    def finish(self) -> JsonOptions:
        """Check the body ended on a complete object; return its fields."""
        self._buf += self._decode.decode(b"", final=True)
        self._run(eof=True)
        if self._state != "end":
            raise malformed("the body ends before the JSON object does")
        try:
            options = JsonOptions.model_validate(self.fields)
        except ValidationError as exc:
            raise invalid(exc) from None
        if (options.log is None) == (options.excerpt is None):
            raise Invalid("send either `log` (the text) or `excerpt` (picked-out lines), not both or neither")
        if self.excerpt is not None:
            self.excerpt.total_lines = options.total_lines
            self.excerpt.total_bytes = options.total_bytes
        self.file.seek(0)
        return options

    # --- the state machine -----------------------------------------------------------------

    def _run(self, *, eof: bool) -> None:
        buf, pos = self._buf, 0
        steps: dict[str, Callable[[str, int, bool], int | None]] = {
            "start": self._start,
            "first_key": self._key_or_end,
            "key": self._key_or_end,
            "colon": self._colon,
            "value": self._value,
            "log": self._log,
            "first_entry": self._entry,
            "entry": self._entry,
            "after_entry": self._after_entry,
            "after_value": self._after_value,
            "end": self._end,
        }
        while True:
            if self._state != "log":
                pos = _matched_to(_WS, buf, pos)
                if pos >= len(buf):
                    break
            moved = steps[self._state](buf, pos, eof)
            if moved is None:  # wait for more input
                break
            pos = moved
        self._buf = buf[pos:]
        bound = ENTRY_VALUE if self._state in ("first_entry", "entry") else SMALL_VALUE
        if self._state != "log" and len(self._buf) > bound:
            raise malformed(f"a value of field {self._key or 'body'!r} is too long")

    def _small(self, buf: str, pos: int, eof: bool) -> tuple[Any, int] | None:
        """A complete small value at pos, or None when more input may complete it."""
        try:
            value, end = self._json.raw_decode(buf, pos)
        except (ValueError, RecursionError) as exc:
            if eof:
                raise malformed(str(exc)) from None
            # An incomplete value: try again once the buffer has doubled, not at every piece.
            self._wait_for = 2 * (len(buf) - pos) + 1
            return None
        if end == len(buf) and not eof and not isinstance(value, (str, list, dict)):
            self._wait_for = len(buf) - pos + 1  # a number may go on in the next piece
            return None
        self._wait_for = 0
        return value, end

    def _start(self, buf: str, pos: int, eof: bool) -> int | None:
        if buf[pos] != "{":
            if self._small(buf, pos, eof) is None:  # malformed or valid, say which
                return None
            raise Invalid("the body must be a JSON object" + EXPECTED)
        self._state = "first_key"
        return pos + 1

    def _key_or_end(self, buf: str, pos: int, eof: bool) -> int | None:
        if buf[pos] == "}" and self._state == "first_key":
            self._state = "end"
            return pos + 1
        if buf[pos] != '"':
            raise malformed(f"expected a field name at {buf[pos : pos + 20]!r}")
        got = self._small(buf, pos, eof)
        if got is None:
            return None
        key, end = got
        if key in self.fields:
            raise Invalid(f"{key}: the field is given twice")
        self._key = key
        self._state = "colon"
        return end

    def _colon(self, buf: str, pos: int, eof: bool) -> int:
        if buf[pos] != ":":
            raise malformed(f"expected ':' after {self._key!r}")
        self._state = "value"
        return pos + 1

    def _value(self, buf: str, pos: int, eof: bool) -> int | None:
        if self._key == "log" and buf[pos] == '"':
            self.fields["log"] = ""  # streamed into the file
            self._state = "log"
            return pos + 1
        if self._key == "excerpt" and buf[pos] == "[":
            self.fields["excerpt"] = []  # streamed into the file and `numbers`
            self.excerpt = ExcerptBody(numbers=array("q"), total_lines=None, total_bytes=None, chars=0)
            self._state = "first_entry"
            return pos + 1
        got = self._small(buf, pos, eof)
        if got is None:
            return None
        self.fields[self._key], end = got
        self._state = "after_value"
        return end

    def _after_value(self, buf: str, pos: int, eof: bool) -> int:
        if buf[pos] == ",":
            self._state = "key"
        elif buf[pos] == "}":
            self._state = "end"
        else:
            raise malformed(f"expected ',' or '}}' after field {self._key!r}")
        return pos + 1

    def _end(self, buf: str, pos: int, eof: bool) -> int:
        raise malformed("there is more after the JSON object")

    # --- the log string --------------------------------------------------------------------

    def _log(self, buf: str, pos: int, eof: bool) -> int | None:
        # Fast path: up to a clean cut between escapes and surrogate halves (the end, when no escape
        # is near it, else just after the last `\n` escape: a log has one a line), decoded by
        # json.loads at C speed. It fails only on a piece holding the closing quote (once a body)
        # or a bad character, which the slow path finds and names.
        stop = len(buf) if buf.rfind("\\", max(pos, len(buf) - 12)) < 0 else _after_last_newline(buf, pos)
        if stop is not None and stop > pos:
            try:
                text = json.loads('"' + buf[pos:stop] + '"')
            except ValueError:
                pass
            else:
                self._write(text.encode("utf-8", errors="replace"))
                return stop
        return self._log_run(buf, pos, eof)

    def _log_run(self, buf: str, pos: int, eof: bool) -> int | None:
        """The slow path, escape by escape: a piece with no newline escape and no closing quote."""
        end = _matched_to(_RUN, buf, pos)
        cut = not eof and end < len(buf) and buf[end] == "\\" and len(buf) - end < 6  # an escape cut in two
        stop = end
        if (
            (cut or (end == len(buf) and not eof))
            and _HIGH_SURROGATE.search(buf, pos, end)
            and _escaped_u(buf, end - 6)
        ):
            stop = end - 6  # keep half a surrogate pair for its other half
        if stop > pos:
            self._write(json.loads('"' + buf[pos:stop] + '"').encode("utf-8", errors="replace"))
        if end == len(buf) or cut:
            if eof:
                raise malformed("the log string is not closed")
            return stop if stop > pos else None
        if buf[end] == '"':
            self._state = "after_value"
            return end + 1
        raise malformed(f"invalid character or escape in the log string: {buf[end : end + 6]!r}")

    def _write(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.limit:
            raise too_large(self.limit)
        self.file.write(data)

    # --- the excerpt array -----------------------------------------------------------------

    def _entry(self, buf: str, pos: int, eof: bool) -> int | None:
        if buf[pos] == "]" and self._state == "first_entry":
            self._state = "after_value"
            return pos + 1
        got = self._small(buf, pos, eof)
        if got is None:
            return None
        value, end = got
        self._add_line(value)
        self._state = "after_entry"
        return end

    def _after_entry(self, buf: str, pos: int, eof: bool) -> int:
        if buf[pos] == ",":
            self._state = "entry"
        elif buf[pos] == "]":
            self._state = "after_value"
        else:
            raise malformed("expected ',' or ']' between excerpt lines")
        return pos + 1

    def _add_line(self, value: Any) -> None:
        assert self.excerpt is not None
        i = len(self.excerpt.numbers)
        try:
            entry = ExcerptLine.model_validate(value)
        except ValidationError as exc:
            raise invalid(exc, f"excerpt.{i}") from None
        if entry.line <= self._previous:
            raise Invalid(f"excerpt[{i}].line: line numbers must increase ({entry.line} follows {self._previous})")
        if "\n" in entry.text:
            raise Invalid(f"excerpt[{i}].text: one line per entry (line {entry.line} holds a newline)")
        if len(entry.text) > MAX_TEXT:
            raise Invalid(f"excerpt[{i}].text: longer than {MAX_TEXT} characters")
        if i >= MAX_EXCERPT_LINES:
            raise TooLarge(
                f"the excerpt has more than {MAX_EXCERPT_LINES} lines; send fewer lines, or the log itself",
                extra={"limit": MAX_EXCERPT_LINES},
            )
        self._previous = entry.line
        self.excerpt.numbers.append(entry.line)
        self.excerpt.chars += len(entry.text) + 1
        data = entry.text.encode("utf-8", errors="replace") + b"\n"
        cap = min(self.limit, MAX_EXCERPT_BYTES)
        if self.size + len(data) > cap:
            raise too_large(cap, "the excerpt")
        self._write(data)


def spool(memory: int = SPOOL_MEMORY) -> BinaryIO:
    """A temporary file that stays in memory up to `memory` bytes."""
    # A binary file in all but typeshed's class tree (SpooledTemporaryFile is not a BinaryIO there).
    return tempfile.SpooledTemporaryFile(max_size=memory)  # type: ignore[return-value]  # noqa: SIM115


def _escaped_u(buf: str, at: int, start: int = 0) -> bool:
    """Whether the backslash at `at` starts an escape (it is not the second half of `\\\\`)."""
    slashes = 0
    while at - slashes >= start and buf[at - slashes] == "\\":
        slashes += 1
    return slashes % 2 == 1


def _after_last_newline(buf: str, pos: int) -> int | None:
    """Just after the last `\\n` escape from pos on, or None."""
    end = len(buf)
    while (at := buf.rfind("\\n", pos, end)) >= 0:
        if _escaped_u(buf, at, pos):
            return at + 2
        end = at
    return None


def too_large(limit: int, what: str = "the log") -> TooLarge:
    """The 413 error, saying the limit and what to do."""
    return TooLarge(
        f"{what} is larger than the limit of {human_bytes(limit)} ({limit} bytes); "
        f"send the end of the log instead, e.g. `tail -c {tail_size(limit)} train.log`",
        extra={"limit": limit},
    )


def tail_size(limit: int) -> str:
    """A `tail -c` size well inside a limit (half of it, rounded down to a unit people type)."""
    half = limit // 2
    if half >= 1 << 20:
        return f"{half >> 20}M"
    return f"{max(1, half >> 10)}K"
