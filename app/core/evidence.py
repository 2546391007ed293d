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
regular expression (`js` is null) matches a line holding one of its `atoms`. Both
implementations screen lines by the atoms before matching; the browser does it on the
raw bytes, so an escape sequence inside a literal (a word coloured mid-message) can hide
a line from it.

The caps are the matcher's own (what it records per pattern), so the server's
diagnosis of the excerpt equals its diagnosis of the whole log; only `count` is a
lower bound for a pattern found on more than `per_pattern` lines.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
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

# The reader's escape-sequence pattern (app.core.reader), for Python's `re` and JavaScript.
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
    single: dict[int, Any]  # pattern id -> its own RE2 (compiled when first needed)
    regexes: Mapping[int, str]
    atom_set: Any  # RE2 Set of every atom (lower case bytes), or None
    atom_bytes: tuple[bytes, ...]
    atom_ids: tuple[frozenset[int], ...]  # per atom: the patterns it screens for
    unscreened: frozenset[int]  # patterns without atoms: every line is a candidate
    everything: frozenset[int]


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
    screens: dict[str, set[int]] = {}
    for p in spec["patterns"]:
        for atom in p["atoms"] or ():
            screens.setdefault(atom, set()).add(p["id"])
    atom_bytes = tuple(a.encode("utf-8") for a in screens)
    atom_set = None
    if atom_bytes:
        bytes_options = re2.Options()
        bytes_options.never_nl = True
        bytes_options.max_mem = 64 << 20
        bytes_options.encoding = re2.Options.Encoding.LATIN1
        atom_set = re2.Set.SearchSet(bytes_options)
        for atom in atom_bytes:
            atom_set.Add(re.escape(atom))
        atom_set.Compile()
    usable = [p for p in spec["patterns"] if p["js"] is not None or p["atoms"]]
    return _Compiled(
        rules=spec["rules"],
        matchers=matchers if set_ids else None,
        set_ids=tuple(set_ids),
        atom_only=tuple(atom_only),
        progress=frozenset(p["id"] for p in spec["patterns"] if p["kind"] == "progress"),
        ansi=re.compile(spec["ansi"]),  # RE2 refuses {0,4096}; the reader uses `re` too
        single={},
        regexes={p["id"]: p["regex"] for p in spec["patterns"] if p["js"] is not None},
        atom_set=atom_set,
        atom_bytes=atom_bytes,
        atom_ids=tuple(frozenset(ids) for ids in screens.values()),
        unscreened=frozenset(p["id"] for p in usable if not p["atoms"]),
        everything=frozenset(p["id"] for p in usable),
    )


def _matches_some(compiled: _Compiled, text: str, ids: Sequence[int]) -> list[int]:
    """Which of some patterns match one line: `_matches` restricted to them."""
    if len(ids) > 1:  # one pass of the whole set costs about what one pattern does
        found_all = _matches(compiled, text)
        return [pid for pid in ids if pid in found_all]
    if "\x1b" in text:
        text = compiled.ansi.sub("", text)
    frames = [f for f in (text.split("\r") if "\r" in text else (text,)) if f]
    lower = [f.translate(_ASCII_LOWER) for f in frames] if compiled.atom_only else []
    atom_only = dict(compiled.atom_only)
    found = []
    for pid in ids:
        if pid in atom_only:
            words = atom_only[pid]
            if any(w in low for low in lower for w in words):
                found.append(pid)
            continue
        regex = compiled.single.get(pid)
        if regex is None:
            options = re2.Options()
            options.never_nl = True
            regex = compiled.single[pid] = re2.compile(compiled.regexes[pid], options)
        if any(regex.search(f) for f in frames):
            found.append(pid)
    return found


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

    def feed(self, block: bytes) -> None:
        """Judge a block of whole lines (the last may lack its newline): what `add` does line by line, faster.

        Lines are screened by their atoms first (as the browser does), and only candidates
        are decoded and matched; a line with an escape sequence is a candidate for every
        pattern, so an escape inside a literal cannot hide it.
        """
        c, rules = self._c, self._c.rules
        lines = block.split(b"\n")
        if block.endswith(b"\n"):
            lines.pop()
        n, base, context = len(lines), self.lines, self.context
        starts = list(accumulate((len(line) + 1 for line in lines), initial=0))
        texts: dict[int, str] = {}

        def text(i: int) -> str:
            t = texts.get(i)
            if t is None:
                t = texts[i] = lines[i][: rules["line_bytes"]].decode("utf-8", errors="replace")
            return t

        candidates: dict[int, set[int]] = {}
        if c.unscreened - c.progress:
            for i in range(n):
                candidates[i] = set(c.unscreened - c.progress)
        if c.atom_set is not None:
            lower = block.lower()
            for a in c.atom_set.Match(lower) or ():
                atom, ids = c.atom_bytes[a], c.atom_ids[a]
                pos = lower.find(atom)
                while pos >= 0:
                    i = bisect_right(starts, pos) - 1
                    candidates.setdefault(i, set()).update(ids)
                    pos = lower.find(atom, starts[i + 1]) if i + 1 < n else -1
        if b"\x1b" in block:
            for i, raw in enumerate(lines):
                if b"\x1b" in raw:
                    candidates.setdefault(i, set()).update(c.everything)

        for i in range(n):  # the head, and context after a match in the previous block
            if base + i + 1 > max(rules["head"], self.after_until):
                break
            self.kept[base + i + 1] = text(i)
        capped: dict[int, list[int]] = {}
        progress_lines: list[int] = []
        for i in sorted(candidates):
            ids = candidates[i]
            if ids & c.progress:
                progress_lines.append(i)
            check = []
            for pid in sorted(ids - c.progress):
                if self.counts.get(pid, 0) >= rules["per_pattern"]:
                    capped.setdefault(pid, []).append(i)
                else:
                    check.append(pid)
            if not check:
                continue
            no = base + i + 1
            for pid in _matches_some(c, text(i), check):
                seen = self.counts[pid] = self.counts.get(pid, 0) + 1
                self.last[pid] = (no, text(i))
                if seen <= rules["per_pattern"]:
                    self.kept[no] = text(i)
                if seen <= rules["with_context"] and context:
                    for j in range(i - context, i):
                        if j >= 0:
                            self.kept[base + j + 1] = text(j)
                    for before_no, before_text in self.before:
                        if before_no >= no - context:
                            self.kept[before_no] = before_text
                    for j in range(i + 1, min(n, i + context + 1)):
                        self.kept[base + j + 1] = text(j)
                    self.after_until = max(self.after_until, no + context)
        for pid, where in capped.items():  # the last match of a pattern over its cap
            for i in reversed(where):
                if _matches_some(c, text(i), (pid,)):
                    self.last[pid] = (base + i + 1, text(i))
                    break
        found: list[tuple[int, str]] = []  # the last progress lines, from the end
        scan = range(n) if c.unscreened & c.progress else progress_lines
        for i in reversed(scan):
            if len(found) >= rules["progress"]:
                break
            if _matches_some(c, text(i), sorted(c.progress)):
                found.append((base + i + 1, text(i)))
        self.progress.extend(reversed(found))
        for i in range(max(0, n - max(int(rules["tail"]), context)), n):
            self.tail.append((base + i + 1, text(i)))
            self.before.append((base + i + 1, text(i)))
        self.lines += n
        self.bytes += len(block) + (0 if block.endswith(b"\n") or not n else 1)

    def excerpt(self, *, ends_with_newline: bool = True) -> Excerpt:
        """What was kept, in line order."""
        kept = dict(self.kept)
        for no, text in (*self.last.values(), *self.progress, *self.tail):
            kept[no] = text
        size = self.bytes - (0 if ends_with_newline or not self.lines else 1)
        return Excerpt(lines=tuple(sorted(kept.items())), total_lines=self.lines, total_bytes=size)


def whole_lines(blocks: Iterable[bytes]) -> Iterator[bytes]:
    """Blocks cut after their last newline (the rest joins the next block); the end as it is."""
    carry = b""
    for block in blocks:
        if not block:
            continue
        data = carry + block if carry else block
        cut = data.rfind(b"\n") + 1
        if cut:
            yield data[:cut]
        carry = data[cut:]
    if carry:
        yield carry


def select_evidence(blocks: Iterable[bytes], spec: Mapping[str, Any]) -> Excerpt:
    """Read a log (as blocks of bytes, e.g. a file's chunks) and keep only the evidence."""
    selector = Selector(spec)
    ends_with_newline = True
    for block in whole_lines(blocks):
        ends_with_newline = block.endswith(b"\n")
        selector.feed(block)
    return selector.excerpt(ends_with_newline=ends_with_newline)
