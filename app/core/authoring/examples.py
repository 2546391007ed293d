"""Tools for signature authors: cut an excerpt of a real log and append it to a signature's examples.

The signature file is edited as text, not re-dumped from YAML: its comments, key order,
quoting and line wrapping stay as the author wrote them. The new example goes at the end
of `examples.match` (or `examples.no_match`) with the indentation of the items already
there, its log as a literal block scalar.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import regex

from app.core.engine.reader import read_lines
from app.core.redaction.redactor import Redactor, count_placeholders
from app.errors import AuthoringError

MAX_EXAMPLE_LINES = 200  # an example is an excerpt, not a log


@dataclass(frozen=True)
class Cut:
    """An excerpt of a log, redacted."""

    text: str
    first: int
    last: int
    redactions: Counter[str]


def parse_range(value: str) -> tuple[int, int]:
    """'12-30' -> (12, 30); '7' -> (7, 7). Line numbers are 1-based and inclusive."""
    match = regex.fullmatch(r"\s*(\d{1,12})\s*(?:-\s*(\d{1,12})\s*)?", value)
    if not match:
        raise AuthoringError(f"expected a line range such as 120-140, got {value!r}")
    first = int(match[1])
    last = int(match[2]) if match[2] else first
    if first < 1 or last < first:
        raise AuthoringError(f"the range {value!r} is empty: lines count from 1 and the end comes after the start")
    return first, last


def cut_excerpt(data: bytes, lines: tuple[int, int] | None = None) -> Cut:
    """The lines first..last of a log (all of it when None), decoded like the reader does, secrets redacted."""
    first, last = lines or (1, MAX_EXAMPLE_LINES)
    if last - first + 1 > MAX_EXAMPLE_LINES:
        raise AuthoringError(
            f"an example is at most {MAX_EXAMPLE_LINES} lines; cut the lines that show the failure with --lines A-B"
        )
    picked: dict[int, str] = {}
    total = 0
    for line in read_lines(data):
        total = line.no
        if line.no > last:
            break
        if line.no >= first:
            picked[line.no] = line.text  # frames of one line: the last one wins
    if lines is None and total > MAX_EXAMPLE_LINES:
        raise AuthoringError(
            f"the log has more than {MAX_EXAMPLE_LINES} lines; choose the lines that show the failure with --lines A-B"
        )
    if not picked:
        raise AuthoringError(f"the log has no text on lines {first}-{last} (it has {total} lines)")
    text = "\n".join(picked.get(no, "") for no in range(first, max(picked) + 1)).strip("\n")
    # YAML holds printable text only: other control characters become U+FFFD.
    text = _UNPRINTABLE.sub("\ufffd", text)
    # The reader may already have redacted the lines; a second pass is harmless and covers it if not.
    redacted = Redactor().text(text).text
    return Cut(redacted, first, max(picked), Counter(count_placeholders([redacted])))


_UNPRINTABLE = regex.compile(r"[^\t\n\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_KEY = regex.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][\w]*):(?P<rest>.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _block_end(lines: list[str], start: int, indent: int) -> int:
    """Index after the last line of the block that starts under lines[start] (deeper than indent)."""
    end = start + 1
    last_content = start
    while end < len(lines):
        line = lines[end]
        if _content(line) and _indent(line) <= indent:
            break
        if _content(line) or (line.strip() and _indent(line) > indent):
            last_content = end
        end += 1
    return last_content + 1


def _find_key(lines: list[str], key: str, indent: int, start: int, stop: int) -> int | None:
    for i in range(start, stop):
        m = _KEY.match(lines[i])
        if m and len(m["indent"]) == indent and m["key"] == key:
            return i
    return None


def _flow(line: str) -> bool:
    """True if a key's value starts on its own line (`[...]`, `{...}` or a scalar), not as a block below it."""
    match = _KEY.match(line)
    rest = match["rest"].strip() if match else ""
    return bool(rest) and not rest.startswith("#")


def _quote(value: str) -> str:
    """A YAML double-quoted scalar."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t")
    return f'"{escaped}"'


def append_example(text: str, log: str, source: str, *, kind: str = "match") -> str:
    """The signature file text with one more example at the end of examples.<kind>."""
    if kind not in ("match", "no_match"):
        raise AuthoringError(f"kind must be match or no_match, not {kind!r}")
    if not log.strip():
        raise AuthoringError("the excerpt is empty")
    if "\n" in source or not source.strip():
        raise AuthoringError("the source is one line saying where the excerpt comes from (an issue, a doc page, a run)")
    lines = text.split("\n")
    examples = _find_key(lines, "examples", 0, 0, len(lines))
    if examples is None:
        raise AuthoringError("the file has no top-level `examples:` section")
    if _flow(lines[examples]):
        raise AuthoringError("`examples:` is written in flow style; make it a block mapping to append to it")
    section_end = _block_end(lines, examples, 0)
    child = next((_indent(lines[i]) for i in range(examples + 1, section_end) if _content(lines[i])), 2)
    key = _find_key(lines, kind, child, examples + 1, section_end)
    if key is None:
        # No such list yet: add it at the end of the section.
        insert_at, item_indent = section_end, child + 2
        new = [f"{' ' * child}{kind}:"]
    else:
        if _flow(lines[key]):
            raise AuthoringError(f"`examples.{kind}` is written in flow style; make it a block list to append to it")
        insert_at = _block_end(lines, key, child)
        item_indent = next(
            (_indent(lines[i]) for i in range(key + 1, insert_at) if lines[i].lstrip().startswith("- ")),
            child + 2,
        )
        new = []
    pad = " " * item_indent
    body = " " * (item_indent + 4)
    log_lines = log.strip("\n").split("\n")
    # An explicit indentation indicator when the first line starts with a space (e.g. "  File ...").
    # (relative to the `log:` key, two spaces further in than the item's dash).
    header = "|2" if log_lines[0][:1] in (" ", "\t") else "|"
    new += [f"{pad}- source: {_quote(source.strip())}", f"{pad}  log: {header}"]
    new += [f"{body}{line}" if line.strip() else "" for line in log_lines]
    out = lines[:insert_at] + new + lines[insert_at:]
    result = "\n".join(out)
    return result if result.endswith("\n") else result + "\n"
