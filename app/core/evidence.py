"""Pick the evidence out of a large log on the client: the one definition of what is kept.

A browser (app/web/static/excerpt.js) or the CLI's remote mode reads a log where it is and
sends only an excerpt, each line with its number in the original file. The server
diagnoses the excerpt (`app.core.excerpt`) and reports original line numbers. The rules,
which `prefilter_spec` publishes as data and `select_evidence` implements here:

* the first `head` and the last `tail` lines of the log;
* for every pattern (the library's fingerprints, symptoms, companions and excludes, the
  engine's generic error markers and version lines, a few extra markers such as
  ``Traceback`` and ``Killed``): its first `per_pattern` matching lines, the
  `context` lines before and after each of its first `with_context` matches, and its
  last matching line;
* the last `progress` lines that match a progress pattern (loss dicts, progress bars).

A line is judged on its first `line_bytes` bytes (decoded as UTF-8, invalid bytes
replaced), with terminal escapes removed, frame by frame (a carriage return starts a
frame); it is kept as decoded, escapes included. A pattern the browser cannot run as a
regular expression (`js` is null) matches a line holding one of its `atoms`.

The caps are the matcher's own (what it records per pattern), so the server's
diagnosis of the excerpt equals its diagnosis of the whole log; only `count` is a
lower bound for a pattern found on more than `per_pattern` lines.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import re2

from app.core.excerpt import Excerpt
from app.core.library import Library
from app.core.literals import atoms, to_js
from app.core.matcher import KEEP_FIRST, KEEP_LINES, PROGRESS_TAIL

SPEC_VERSION = 1
HEAD_LINES = 50
TAIL_LINES = 50
LINE_BYTES = 32 << 10

# Markers kept besides the library's own patterns: what a person looks for in a log.
MARKERS: tuple[tuple[str, str], ...] = (
    ("traceback", r"Traceback \(most recent call last\)"),
    ("killed", r"\bKilled\b"),
    ("signal", r"\b(?:SIGKILL|SIGTERM|SIGABRT|SIGSEGV|SIGBUS)\b"),
    ("exit_code", r"(?i)\bexit ?code[ :=]{1,3}-?\d"),
    ("launcher_summary", r"Root Cause \(first observed failure\)|ChildFailedError|\bFAILED\b"),
)

# The reader's escape-sequence pattern (app.core.reader), written for both engines.
ANSI = (
    r"\x1b\[[0-9;:?<=>]{0,64}[ -/]{0,8}[@-~]"
    r"|\x1b\][^\x07\x1b\n]{0,4096}(?:\x07|\x1b\\)"
    r"|\x1b[@-Z\\-_]"
)


def prefilter_spec(library: Library, *, context: int = 5) -> dict[str, Any]:
    """The selection rules and patterns, as JSON a browser runs (see the module docstring)."""
    patterns: list[dict[str, Any]] = []
    seen: set[str] = set()
    entries: list[tuple[str, str, str | None, str]] = []
    for regex, rules in zip(library.regexes, library.rules, strict=True):
        rule = rules[0]
        kind: str = "progress" if all(r.kind == "progress" for r in rules) else rule.kind
        entries.append((regex, kind, rule.signature, rule.name))
    entries.extend((regex, "marker", None, name) for name, regex in MARKERS)
    for regex, kind, signature, name in entries:
        if regex in seen:
            continue
        seen.add(regex)
        js = to_js(regex)
        found = atoms(regex)
        if js is None and found is None:
            continue  # neither engine can screen for it in the browser
        patterns.append(
            {
                "id": len(patterns),
                "kind": kind,
                "signature": signature,
                "name": name,
                "regex": regex,
                "js": js[0] if js else None,
                "flags": js[1] if js else "",
                "atoms": list(found) if found else None,
            }
        )
    return {
        "version": SPEC_VERSION,
        "library_version": library.version,
        "rules": {
            "head": HEAD_LINES,
            "tail": TAIL_LINES,
            "context": context,
            "with_context": KEEP_FIRST,
            "per_pattern": KEEP_LINES + 1,  # one past what the matcher tracks: it sees the same saturation
            "progress": PROGRESS_TAIL,
            "line_bytes": LINE_BYTES,
        },
        "ansi": ANSI,
        "patterns": patterns,
    }


@dataclass(frozen=True)
class _Compiled:
    rules: Mapping[str, int]
    matchers: Any  # RE2 Set over the patterns with a regex, or None
    set_ids: tuple[int, ...]  # Set index -> pattern id
    atom_only: tuple[tuple[int, tuple[str, ...]], ...]
    progress: frozenset[int]
    ansi: Any


def _compile(spec: Mapping[str, Any]) -> _Compiled:
    options = re2.Options()
    options.never_nl = True
    options.max_mem = 64 << 20  # the whole library in one automaton
    matchers = re2.Set.SearchSet(options)
    set_ids: list[int] = []
    atom_only: list[tuple[int, tuple[str, ...]]] = []
    for p in spec["patterns"]:
        if p["js"] is not None:
            matchers.Add(p["regex"])
            set_ids.append(p["id"])
        elif p["atoms"]:
            atom_only.append((p["id"], tuple(p["atoms"])))
    matchers.Compile()
    return _Compiled(
        rules=spec["rules"],
        matchers=matchers if set_ids else None,
        set_ids=tuple(set_ids),
        atom_only=tuple(atom_only),
        progress=frozenset(p["id"] for p in spec["patterns"] if p["kind"] == "progress"),
        ansi=re.compile(spec["ansi"]),  # RE2 refuses {0,4096}; the reader uses `re` too
    )


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _matches(compiled: _Compiled, text: str) -> set[int]:
    """Ids of the patterns that match one line (any of its frames)."""
    if "\x1b" in text:
        text = compiled.ansi.sub("", text)
    found: set[int] = set()
    for frame in text.split("\r") if "\r" in text else (text,):
        if not frame:
            continue
        if compiled.matchers is not None:
            found.update(compiled.set_ids[i] for i in compiled.matchers.Match(frame) or ())
        if compiled.atom_only:
            lower = frame.translate(_ASCII_LOWER)
            found.update(pid for pid, words in compiled.atom_only if any(w in lower for w in words))
    return found


def physical_lines(blocks: Iterable[bytes]) -> Iterator[bytes]:
    """The lines of a log read as blocks, without their newline (a last line without one counts)."""
    carry = b""
    for block in blocks:
        if not block:
            continue
        data = carry + block if carry else block
        lines = data.split(b"\n")
        carry = lines.pop()
        yield from lines
    if carry:
        yield carry


class Selector:
    """Apply the rules to a log line by line, in bounded memory."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self._c = _compile(spec)
        rules = self._c.rules
        self.context = int(rules["context"])
        self.kept: dict[int, str] = {}
        self.counts: dict[int, int] = {}
        self.last: dict[int, tuple[int, str]] = {}
        self.progress: deque[tuple[int, str]] = deque(maxlen=int(rules["progress"]))
        self.tail: deque[tuple[int, str]] = deque(maxlen=int(rules["tail"]))
        self.before: deque[tuple[int, str]] = deque(maxlen=max(1, self.context))
        self.after_until = 0
        self.lines = 0
        self.bytes = 0

    def add(self, raw: bytes) -> None:
        """Judge the next physical line (without its newline)."""
        rules = self._c.rules
        self.lines += 1
        self.bytes += len(raw) + 1
        no = self.lines
        text = raw[: rules["line_bytes"]].decode("utf-8", errors="replace")
        if no <= rules["head"] or no <= self.after_until:
            self.kept[no] = text
        for pid in sorted(_matches(self._c, text)):
            if pid in self._c.progress:
                if not self.progress or self.progress[-1][0] != no:
                    self.progress.append((no, text))
                continue
            n = self.counts[pid] = self.counts.get(pid, 0) + 1
            self.last[pid] = (no, text)
            if n <= rules["per_pattern"]:
                self.kept[no] = text
            if n <= rules["with_context"] and self.context:
                for before_no, before_text in self.before:
                    if before_no >= no - self.context:
                        self.kept[before_no] = before_text
                self.after_until = max(self.after_until, no + self.context)
        self.before.append((no, text))
        self.tail.append((no, text))

    def excerpt(self, *, ends_with_newline: bool = True) -> Excerpt:
        """What was kept, in line order."""
        kept = dict(self.kept)
        for no, text in (*self.last.values(), *self.progress, *self.tail):
            kept[no] = text
        size = self.bytes - (0 if ends_with_newline or not self.lines else 1)
        return Excerpt(lines=tuple(sorted(kept.items())), total_lines=self.lines, total_bytes=size)


def select_evidence(blocks: Iterable[bytes], spec: Mapping[str, Any]) -> Excerpt:
    """Read a log (as blocks of bytes, e.g. a file's chunks) and keep only the evidence."""
    selector = Selector(spec)
    ends_with_newline = True

    def watched() -> Iterator[bytes]:
        nonlocal ends_with_newline
        for block in blocks:
            if block:
                ends_with_newline = block.endswith(b"\n")
                yield block

    for raw in physical_lines(watched()):
        selector.add(raw)
    return selector.excerpt(ends_with_newline=ends_with_newline)
