"""Pick the evidence out of a large log on the client: the one definition of what is kept.

A browser (app/web/static/excerpt.js) or the CLI's remote mode reads a log where it is and
sends only an excerpt, each line with its number in the original file. The server
diagnoses the excerpt (`app.core.selection.excerpt`) and reports original line numbers. The rules,
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

import contextlib
import re
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import re2

from app.core.engine.matcher import KEEP_FIRST, KEEP_LINES, PROGRESS_TAIL
from app.core.engine.rewrites import byte_superset
from app.core.knowledge.loading import Library
from app.core.selection.excerpt import Excerpt
from app.core.selection.literals import atoms, to_js

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

# The reader's escape-sequence pattern (app.core.engine.reader), for Python's `re` and JavaScript.
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
    matchers: list[Any]  # [RE2 Set over the patterns with a regex], compiled on first use (or [None])
    set_ids: tuple[int, ...]  # Set index -> pattern id
    atom_only: tuple[tuple[int, tuple[str, ...]], ...]
    progress: frozenset[int]
    ansi: Any
    single: dict[int, Any]  # pattern id -> its own RE2 (compiled when first needed)
    regexes: Mapping[int, str]
    screen: Any  # RE2 Set of every pattern, loosened, over a block's text: which may match in it
    screen_ids: tuple[int, ...]  # screen index -> pattern id
    screens: Mapping[int, bytes]  # pattern id -> its screen, to locate it in a block
    everywhere: frozenset[int]  # patterns the screen cannot bound: every line is a candidate
    atom_map: Mapping[int, tuple[str, ...]]  # atom_only as a mapping
    exact: frozenset[int]  # patterns whose screen is the pattern itself on a clean line (`_BlockText.clean`)
    located: dict[int, Any] = field(default_factory=dict)  # pattern id -> its screen's search (on first use)


# A screen must match wherever its pattern matches some frame of a line: `\A` and `\z`
# mean a frame's ends there but the block's ends in a screen, so such patterns are not screened.
_FRAME_ENDS = re.compile(r"\\.")
# Characters a pattern's ASCII letters match under `(?i)` in text, not in bytes (the Kelvin
# sign and the long s): lines holding them are candidates for every pattern.
_FOLDS = (b"\xe2\x84\xaa", b"\xc5\xbf")
_FOLD_SCREEN = b"(?:\\xe2\\x84\\xaa|\\xc5\\xbf)"
_FOLD = -1  # the screen's id for them


def _literal(text: str) -> str:
    """A literal for RE2 over bytes: ASCII as escapes, any other character as its bytes may be."""
    return "".join(f"\\x{ord(ch):02x}" if ch.isascii() else r"(?:[\x80-\xff]{1,4})" for ch in text)


def _screen_source(p: Mapping[str, Any]) -> tuple[str, bool] | None:
    """A pattern for the screen over raw bytes (see `rewrites.byte_superset`), or None."""
    if p["js"] is None:  # matched by its atoms in ASCII lower case: any case is a superset
        return "(?i)(?:" + "|".join(_literal(a) for a in p["atoms"]) + ")", True
    if any(m[0] in ("\\A", "\\z") for m in _FRAME_ENDS.finditer(p["regex"])):
        return None
    source, exact = byte_superset(p["regex"])
    return "(?m)" + source, exact


def _compile(spec: Mapping[str, Any]) -> _Compiled:
    set_ids: list[int] = []
    atom_only: list[tuple[int, tuple[str, ...]]] = []
    for p in spec["patterns"]:
        if p["js"] is not None:
            set_ids.append(p["id"])
        elif p["atoms"]:
            atom_only.append((p["id"], tuple(p["atoms"])))
    screen = re2.Set.SearchSet(_BYTES)
    screen_ids: list[int] = []
    screens: dict[int, bytes] = {}
    exact: set[int] = set()
    everywhere: set[int] = set()
    for p in spec["patterns"]:
        if p["js"] is None and not p["atoms"]:
            continue  # neither engine can run it
        found = _screen_source(p)
        if found is None:
            everywhere.add(p["id"])
            continue
        source = found[0].encode("ascii")
        screen.Add(source)
        screen_ids.append(p["id"])
        screens[p["id"]] = source
        if found[1]:
            exact.add(p["id"])
    screen.Add(_FOLD_SCREEN)  # last: its index is len(screen_ids)
    screen.Compile()
    return _Compiled(
        rules=spec["rules"],
        matchers=[],
        set_ids=tuple(set_ids),
        atom_only=tuple(atom_only),
        progress=frozenset(p["id"] for p in spec["patterns"] if p["kind"] == "progress"),
        ansi=re.compile(spec["ansi"]),  # RE2 refuses {0,4096}; the reader uses `re` too
        single={},
        regexes={p["id"]: p["regex"] for p in spec["patterns"] if p["js"] is not None},
        screen=screen,
        screen_ids=(*screen_ids, _FOLD),
        screens=screens,
        everywhere=frozenset(everywhere),
        atom_map=dict(atom_only),
        exact=frozenset(exact),
    )


def _bytes_options() -> Any:
    options = re2.Options()
    options.never_nl = True
    # The whole library in one automaton. With 64 MiB RE2 flushes its cache of automaton
    # states now and then over a long log and builds them again: with more, the Set scans
    # about 15 % faster (memory grows only as far as the log's states need).
    options.max_mem = 256 << 20
    options.encoding = re2.Options.Encoding.LATIN1  # bytes as bytes: invalid UTF-8 needs no decoding
    return options


_BYTES = _bytes_options()
_LOCATE = _bytes_options()
_LOCATE.never_capture = True  # only where a line may match is wanted


def _frames(compiled: _Compiled, text: str) -> list[str]:
    """A line as `_matches` judges it: without escape sequences, frame by frame."""
    if "\x1b" in text:
        text = compiled.ansi.sub("", text)
    return [f for f in (text.split("\r") if "\r" in text else (text,)) if f]


def _single(compiled: _Compiled, pid: int) -> Any:
    """A pattern's own RE2 over a line's text (compiled when first needed)."""
    regex = compiled.single.get(pid)
    if regex is None:
        options = re2.Options()
        options.never_nl = True
        regex = compiled.single[pid] = re2.compile(compiled.regexes[pid], options)
    return regex


_UNANCHORED = re2._Anchor.UNANCHORED
AHEAD = 1024  # matches of a pattern located per slice while it is screened (more, if needed, later)


def _locator(compiled: _Compiled, pid: int) -> Any:
    """The search of a pattern's screen over a block's text (compiled when first needed)."""
    search = compiled.located.get(pid)
    if search is None:  # two threads may compile it at once: either result will do
        search = compiled.located[pid] = re2.compile(compiled.screens[pid], _LOCATE)._regexp.Match
    return search


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _exact_set(compiled: _Compiled) -> Any:
    """The RE2 Set of the exact patterns over a line's text, or None; compiled when first needed.

    Its bounded repeats make it slow to compile (a second or so for the shipped library), and
    the block path needs it only for the rare lines longer than `line_bytes`.
    """
    if not compiled.matchers:
        matchers = None
        if compiled.set_ids:
            options = re2.Options()
            options.never_nl = True
            options.max_mem = 64 << 20  # the whole library in one automaton
            matchers = re2.Set.SearchSet(options)
            for pid in compiled.set_ids:
                matchers.Add(compiled.regexes[pid])
            matchers.Compile()
        compiled.matchers.append(matchers)
    return compiled.matchers[0]


def _matches(compiled: _Compiled, text: str) -> set[int]:
    """Ids of the patterns that match one line (any of its frames)."""
    if "\x1b" in text:
        text = compiled.ansi.sub("", text)
    found: set[int] = set()
    for frame in text.split("\r") if "\r" in text else (text,):
        if not frame:
            continue
        matchers = _exact_set(compiled)
        if matchers is not None:
            found.update(compiled.set_ids[i] for i in matchers.Match(frame) or ())
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


SLICE_BYTES = 256 << 10  # the screen names patterns per slice: a pattern is located only in its slices


class _BlockText:
    """A block of whole lines: its lines' bounds, their decoded text, and the text the screen scans."""

    def __init__(self, compiled: _Compiled, data: bytes, size: int) -> None:
        import numpy  # large logs only: a small one does not pay for the import

        self.raw, self.size = data, size  # the block is data[:size], not copied out
        self.line_bytes = int(compiled.rules["line_bytes"])
        newlines = numpy.flatnonzero(numpy.frombuffer(data, dtype=numpy.uint8, count=size) == 10)
        whole = size > 0 and data[size - 1] == 10
        ends = newlines if whole else numpy.append(newlines, size)
        self.raw_ends: list[int] = ends.tolist()
        self.n = len(self.raw_ends)
        # Lines judged on a cut prefix (the screen sees them whole) are judged one by one.
        self.direct: set[int] = set(numpy.flatnonzero(numpy.diff(ends, prepend=-1) - 1 > self.line_bytes).tolist())
        self.buf = data
        self.ends: list[int] | None = self.raw_ends
        if data.find(b"\x1b", 0, size) >= 0:  # the screen scans the text as the rules judge it: without escapes
            decoded = compiled.ansi.sub("", data[:size].decode("utf-8", errors="replace"))
            self.buf = decoded.encode("utf-8", errors="surrogatepass")
            self.size = len(self.buf)
            buf_ends = numpy.flatnonzero(numpy.frombuffer(self.buf, dtype=numpy.uint8) == 10).tolist()
            if not whole:
                buf_ends.append(self.size)
            self.ends = buf_ends if len(buf_ends) == self.n else None
        self.ascii = self.size == len(self.buf) and self.buf.isascii()
        self._texts: dict[int, str] = {}

    def clean(self, i: int) -> bool:
        """Whether line i is judged as the screen sees it: whole, one frame (no CR), in ASCII."""
        ends = self.ends
        assert ends is not None
        start, end, buf = ends[i - 1] + 1 if i else 0, ends[i], self.buf
        return i not in self.direct and buf.find(b"\r", start, end) < 0 and (self.ascii or buf[start:end].isascii())

    def text(self, i: int) -> str:
        """Line i as the rules judge and keep it: its first line_bytes bytes, decoded."""
        t = self._texts.get(i)
        if t is None:
            start = self.raw_ends[i - 1] + 1 if i else 0
            end = min(self.raw_ends[i], start + self.line_bytes)
            t = self._texts[i] = self.raw[start:end].decode("utf-8", errors="replace")
        return t

    def start(self, i: int) -> int:
        """Where line i starts in the scanned text."""
        assert self.ends is not None
        return self.ends[i - 1] + 1 if i else 0

    def slices(self) -> list[tuple[int, int]]:
        """The scanned text cut into runs of whole lines of about SLICE_BYTES."""
        assert self.ends is not None
        ends, size, out, s = self.ends, self.size, [], 0
        while s < size:
            k = bisect_left(ends, s + SLICE_BYTES)
            e = size if k >= len(ends) else min(ends[k] + 1, size)
            out.append((s, e))
            s = e
        return out


@dataclass(frozen=True)
class _Screened:
    """A block being judged (block[:size]): its text, and per slice what the screen found (None: line by line)."""

    text: _BlockText
    block: bytes
    size: int
    last_newline: bool
    found: Iterable[tuple[tuple[int, int], Any]] | None


class _BlockPass:
    """One block through the rules (see `Selector.feed`)."""

    def __init__(self, selector: Selector, text: _BlockText) -> None:
        self.sel, self.t, self.c = selector, text, selector._c
        self.rules = self.c.rules
        self.base = selector.lines
        self._frames: dict[int, list[str]] = {}
        self._lower: dict[int, list[str]] = {}
        self._utf8: dict[int, list[bytes]] = {}
        self.present: dict[int, list[tuple[int, int]]] = {}
        self.extra: dict[int, list[int]] = {}  # pattern -> long lines it matches
        # (pattern, slice start) -> the slice's end, where the screen matched in it, and where
        # to go on searching (None: nowhere), as the screening thread found (`Selector._scan`).
        self.ahead: dict[tuple[int, int], tuple[int, list[int], int | None]] = {}

    def run(self, screened: Iterable[tuple[tuple[int, int], Any]]) -> None:
        """Apply the rules to the block, given what the screen found in each of its slices."""
        sel, t, c, rules, base = self.sel, self.t, self.c, self.rules, self.base
        for i in range(t.n):  # the head, and context after a match in the previous block
            if base + i + 1 > max(rules["head"], sel.after_until):
                break
            sel.kept[base + i + 1] = t.text(i)
        for (s, e), (found, ahead) in screened:
            for idx in found:
                self.present.setdefault(c.screen_ids[idx], []).append((s, e))
            for pid, (at, resume) in ahead.items():
                self.ahead[pid, s] = (e, at, resume)
        for pid in c.everywhere:
            self.present[pid] = [(0, t.size)]
        for i in sorted(t.direct):
            for pid in self.maybe(i):
                self.extra.setdefault(pid, []).append(i)
        folds = self.present.pop(_FOLD, [])
        for i in sorted({i for s, e in folds for i in self.located_bytes(_FOLDS, s, e)}):
            for pid in (*c.screens, *c.everywhere):
                self.extra.setdefault(pid, []).append(i)
        found = set(self.present) | set(self.extra)
        self.progress(sorted(found & c.progress))
        for pid in sorted(found - c.progress):
            self.pattern(pid)
        context = sel.context
        for i in range(max(0, t.n - max(int(rules["tail"]), context)), t.n):
            sel.tail.append((base + i + 1, t.text(i)))
            sel.before.append((base + i + 1, t.text(i)))

    def frames(self, i: int) -> list[str]:
        f = self._frames.get(i)
        if f is None:
            f = self._frames[i] = _frames(self.c, self.t.text(i))
        return f

    def maybe(self, i: int) -> set[int]:
        """The patterns that may match line i, by the screen run on its frames alone."""
        c, found = self.c, set(self.c.everywhere)
        for data in self.utf8(i):
            found.update(c.screen_ids[idx] for idx in c.screen._set.Match(data) or ())
        if _FOLD in found:  # a character only text case folding matches: any pattern may
            return {*c.screens, *c.everywhere}
        return found

    def utf8(self, i: int) -> list[bytes]:
        f = self._utf8.get(i)
        if f is None:
            f = self._utf8[i] = [frame.encode("utf-8", errors="surrogatepass") for frame in self.frames(i)]
        return f

    def confirm(self, i: int, pid: int, *, found: bool = True) -> bool:
        """Whether a pattern matches line i: what `_matches` says of it, for one pattern.

        When the pattern's screen `found` the line, the screen is the pattern itself
        (`_Compiled.exact`) and it sees the line as the rules do (`_BlockText.clean`),
        that finding is the answer.
        """
        if found and pid in self.c.exact and self.t.clean(i):
            return True
        atoms = self.c.atom_map.get(pid)
        if atoms is not None:
            lower = self._lower.get(i)
            if lower is None:
                lower = self._lower[i] = [f.translate(_ASCII_LOWER) for f in self.frames(i)]
            return any(w in low for low in lower for w in atoms)
        regexp = _single(self.c, pid)._regexp  # not the wrapper's search(): it costs more than the match
        return any(regexp.Match(_UNANCHORED, data, 0, len(data))[0][0] >= 0 for data in self.utf8(i))

    def located_bytes(self, needles: tuple[bytes, ...], lo: int, hi: int) -> Iterator[int]:
        """Lines starting in the scanned text's [lo, hi) that hold one of the needles."""
        t = self.t
        assert t.ends is not None
        for needle in needles:
            at = t.buf.find(needle, lo, hi)
            while at >= 0:
                i = bisect_left(t.ends, at)
                yield i
                at = t.buf.find(needle, t.ends[i] + 1, hi) if i + 1 < t.n else -1

    def located(self, pid: int, lo: int, hi: int) -> Iterator[int]:
        """Lines starting in the scanned text's [lo, hi) that the pattern's screen matches, in order."""
        t = self.t
        ends = t.ends
        assert ends is not None
        if pid in self.c.everywhere:
            yield from range(bisect_left(ends, lo), bisect_left(ends, hi))
            return
        pos, ahead = lo, self.ahead.get((pid, lo))
        if ahead is not None and ahead[0] == hi:  # located while the slice was screened
            i = 0
            for at in ahead[1]:
                i = bisect_left(ends, at, i)
                yield i
            if ahead[2] is None:
                return
            pos = ahead[2]
        search, buf = _locator(self.c, pid), t.buf
        while pos < hi:
            at = search(_UNANCHORED, buf, pos, hi)[0][0]
            if not 0 <= at < hi:
                return
            i = bisect_left(ends, at)
            yield i
            pos = ends[i] + 1

    def candidates(self, pid: int, lo: int, hi: int) -> list[int]:
        """Lines in [lo, hi) that may match the pattern (screened, or long), in order."""
        t = self.t
        found: set[int] = set()
        for s, e in self.present.get(pid, ()):
            if e > lo and s < hi:
                found.update(self.located(pid, max(s, lo), min(e, hi)))
        for i in self.extra.get(pid, ()):
            if lo <= t.start(i) < hi:
                found.add(i)
        return sorted(found)

    def hit(self, pid: int, i: int, count: int) -> None:
        """Keep line i, the pattern's `count`-th match, with its context if it is among the first."""
        sel, t, base, context = self.sel, self.t, self.base, self.sel.context
        no = base + i + 1
        sel.kept[no] = t.text(i)
        if count <= self.rules["with_context"] and context:
            for j in range(max(0, i - context), i):
                sel.kept[base + j + 1] = t.text(j)
            for before_no, before_text in sel.before:
                if before_no >= no - context:
                    sel.kept[before_no] = before_text
            for j in range(i + 1, min(t.n, i + context + 1)):
                sel.kept[base + j + 1] = t.text(j)
            sel.after_until = max(sel.after_until, no + context)

    def pattern(self, pid: int) -> None:
        """A pattern's first matches (kept, some with context), then its last."""
        sel, t, rules, base = self.sel, self.t, self.rules, self.base
        cap, count = int(rules["per_pattern"]), sel.counts.get(pid, 0)
        last, done, exhausted = None, -1, True  # the last match seen; the last line examined
        if count < cap:
            exact, clean, kept, text = pid in self.c.exact, t.clean, sel.kept, t.text
            with_context = rules["with_context"] if sel.context else 0
            for i in self._ordered(pid):
                if count >= cap:
                    exhausted = False
                    break
                done = i
                if not (exact and clean(i)) and not self.confirm(i, pid):
                    continue
                count += 1
                last = i
                if count <= with_context:
                    self.hit(pid, i, count)
                else:  # the common case, spelled out: most matches are past the first few
                    kept[base + i + 1] = text(i)
            sel.counts[pid] = count
        else:
            exhausted = False
        if not exhausted and done < t.n - 1:  # past its cap: only its last match matters
            lo = t.start(done + 1) if done >= 0 else 0
            later = self._from_end([pid], lo, t.size, 1)
            if later:
                last = later[0]
        if last is not None:
            sel.last[pid] = (base + last + 1, t.text(last))

    def _ordered(self, pid: int) -> Iterator[int]:
        """The lines that may match a pattern, in order, found slice by slice as they are needed."""
        if pid not in self.extra and pid not in self.c.everywhere:  # the slices hold whole lines, in order
            for s, e in self.present.get(pid, ()):
                yield from self.located(pid, s, e)
            return
        spans = list(self.present.get(pid, ()))
        spans.extend((self.t.start(i), self.t.start(i) + 1) for i in self.extra.get(pid, ()))
        prev = -1
        for s, e in sorted(spans):
            for i in self.candidates(pid, s, e):
                if i > prev:
                    prev = i
                    yield i

    def _from_end(self, ids: list[int], lo: int, hi: int, want: int) -> list[int]:
        """Up to `want` lines in [lo, hi), last first, that one of the patterns matches.

        Windows of whole lines from the end, each eight times the last: a frequent pattern
        is found in the first small one, a rare one costs a few searches of the block.
        """
        t, size = self.t, 4096
        found: list[int] = []
        while hi > lo and len(found) < want:
            assert t.ends is not None
            start = max(lo, hi - size)
            k = bisect_left(t.ends, start)
            start = max(lo, t.start(k) if k < t.n else hi)
            finders: dict[int, set[int]] = {}  # line -> the patterns whose screens found it
            for p in ids:
                for i in self.candidates(p, start, hi):
                    finders.setdefault(i, set()).add(p)
            for i in sorted(finders, reverse=True):
                # A pattern whose screen did not find the line is judged without the shortcut.
                if any(self.confirm(i, p, found=p in finders[i]) for p in ids):
                    found.append(i)
                    if len(found) >= want:
                        break
            hi, size = start, size * 8
        return found

    def progress(self, ids: list[int]) -> None:
        """The last progress lines of the block: lines any progress pattern matches."""
        if not ids:
            return
        t, base = self.t, self.base
        lines = self._from_end(sorted(self.c.progress), 0, t.size, int(self.rules["progress"]))
        self.sel.progress.extend((base + i + 1, t.text(i)) for i in reversed(lines))


class Selector:
    """Apply the rules to a log line by line, in bounded memory."""

    def __init__(self, spec: Mapping[str, Any], *, scan_map: Callable[..., Iterable[Any]] = map) -> None:
        self._c = _compile(spec)
        self.scan_map = scan_map  # `map`, or an executor's: slices are screened in parallel
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

    def feed(self, block: bytes, size: int | None = None) -> None:
        """Judge block[:size], whole lines (the last may lack its newline): what `add` does, faster."""
        self.judge(self.screen(block, len(block) if size is None else size))

    def screen(self, block: bytes, size: int) -> _Screened | None:
        """Start judging block[:size]: its lines are found and its slices handed to the screen.

        The block's text (escape sequences removed) is scanned in slices by one RE2 Set of
        every pattern, loosened to match a superset of the lines the pattern matches
        (`rewrites.byte_superset`). With an executor's `scan_map` the slices are scanned by
        its threads (RE2 releases the GIL) while this thread judges the block before.
        """
        if not size:
            return None
        text = _BlockText(self._c, block, size)
        last_newline = block[size - 1] == 10
        if text.ends is None:  # escape rules that would join lines: judged line by line
            return _Screened(text, block, size, last_newline, None)
        slices = text.slices()
        found = self.scan_map(lambda span: self._scan(text.buf, span), slices)
        return _Screened(text, block, size, last_newline, zip(slices, found, strict=True))

    def _scan(self, buf: bytes, span: tuple[int, int]) -> tuple[Sequence[int], dict[int, tuple[list[int], int | None]]]:
        """What the screen finds in one slice, and where the patterns still short of their cap are in it.

        Runs in the executor's threads: RE2 releases the GIL while it searches, so the
        patterns are located there, ahead of the thread that judges blocks in order. Their
        counts may be behind (blocks before this one are still being judged): a pattern
        is located here up to what it may still need (`AHEAD` at most); `_BlockPass.located`
        takes over from where this stopped.
        """
        c, s, e = self._c, span[0], span[1]
        found = c.screen._set.Match(memoryview(buf)[s:e]) or ()
        ahead: dict[int, tuple[list[int], int | None]] = {}
        cap = int(c.rules["per_pattern"])
        for idx in found:
            pid = c.screen_ids[idx]
            budget = min(cap - self.counts.get(pid, 0), AHEAD)
            if pid == _FOLD or pid in c.progress or budget <= 0:
                continue
            search, at, pos, resume = _locator(c, pid), [], s, None
            while pos < e:
                start = search(_UNANCHORED, buf, pos, e)[0][0]
                if not 0 <= start < e:
                    break
                at.append(start)
                newline = buf.find(b"\n", start, e)
                pos = e if newline < 0 else newline + 1
                if len(at) >= budget and pos < e:
                    resume = pos
                    break
            ahead[pid] = (at, resume)
        return found, ahead

    def judge(self, screened: _Screened | None) -> None:
        """Finish judging a block `screen` started (blocks in order).

        A pattern is located only in the slices the Set names, and only as far as the rules
        still need it (its first matches, then its last). Each line found this way is
        confirmed by the line-by-line rules unless the screen is the pattern itself, so what
        is kept is what `add` keeps.
        """
        if screened is None:
            return
        text = screened.text
        if screened.found is None:
            for raw in physical_lines([screened.block[: screened.size]]):
                self.add(raw)
            return
        _BlockPass(self, text).run(screened.found)
        self.lines += text.n
        self.bytes += screened.size + (0 if screened.last_newline else 1)

    def excerpt(self, *, ends_with_newline: bool = True) -> Excerpt:
        """What was kept, in line order."""
        kept = dict(self.kept)
        for no, text in (*self.last.values(), *self.progress, *self.tail):
            kept[no] = text
        size = self.bytes - (0 if ends_with_newline or not self.lines else 1)
        return Excerpt(lines=tuple(sorted(kept.items())), total_lines=self.lines, total_bytes=size)


def _whole_lines(blocks: Iterable[bytes]) -> Iterator[tuple[bytes, int]]:
    """Blocks cut after their last newline (the rest joins the next), as (data, size): data[:size], uncopied."""
    carry = b""
    for block in blocks:
        if not block:
            continue
        data = carry + block if carry else block
        size = data.rfind(b"\n") + 1
        if size:
            yield data, size
        carry = data[size:]
    if carry:
        yield carry, len(carry)


def select_evidence(blocks: Iterable[bytes], spec: Mapping[str, Any], *, threads: int = 1) -> Excerpt:
    """Read a log (as blocks of bytes, e.g. a file's chunks) and keep only the evidence.

    With `threads` > 1, each block's slices are screened by that many threads.
    """
    with contextlib.ExitStack() as stack:
        scan_map: Callable[..., Iterable[Any]] = map
        if threads > 1:
            scan_map = stack.enter_context(ThreadPoolExecutor(threads, thread_name_prefix="evidence")).map
        selector = Selector(spec, scan_map=scan_map)
        ends_with_newline = True
        ahead: _Screened | None = None  # the next block is screened while this one is judged
        for data, size in _whole_lines(blocks):
            ends_with_newline = data[size - 1] == 10
            screened = selector.screen(data, size)
            selector.judge(ahead)
            ahead = screened
        selector.judge(ahead)
    return selector.excerpt(ends_with_newline=ends_with_newline)
