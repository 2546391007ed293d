"""One block of whole lines through the selection rules: its lines' bounds and text, the
slices the screen names patterns for, and the lines each pattern keeps.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.core.selection.screens import (
    ASCII_LOWER,
    FOLD,
    FOLDS,
    UNANCHORED,
    CompiledSpec,
    frames_of,
    locator,
    single_regex,
)

if TYPE_CHECKING:
    from app.core.selection.selector import Selector


SLICE_BYTES = 256 << 10  # the screen names patterns per slice: a pattern is located only in its slices


class BlockText:
    """A block of whole lines: its lines' bounds, their decoded text, and the text the screen scans."""

    def __init__(self, compiled: CompiledSpec, data: bytes, size: int) -> None:
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
class Screened:
    """A block being judged (block[:size]): its text, and per slice what the screen found (None: line by line)."""

    text: BlockText
    block: bytes
    size: int
    last_newline: bool
    found: Iterable[tuple[tuple[int, int], Any]] | None


class BlockPass:
    """One block through the rules (see `Selector.feed`)."""

    def __init__(self, selector: Selector, text: BlockText) -> None:
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
        folds = self.present.pop(FOLD, [])
        for i in sorted({i for s, e in folds for i in self.located_bytes(FOLDS, s, e)}):
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
            f = self._frames[i] = frames_of(self.c, self.t.text(i))
        return f

    def maybe(self, i: int) -> set[int]:
        """The patterns that may match line i, by the screen run on its frames alone."""
        c, found = self.c, set(self.c.everywhere)
        for data in self.utf8(i):
            found.update(c.screen_ids[idx] for idx in c.screen.match(data) or ())
        if FOLD in found:  # a character only text case folding matches: any pattern may
            return {*c.screens, *c.everywhere}
        return found

    def utf8(self, i: int) -> list[bytes]:
        f = self._utf8.get(i)
        if f is None:
            f = self._utf8[i] = [frame.encode("utf-8", errors="surrogatepass") for frame in self.frames(i)]
        return f

    def confirm(self, i: int, pid: int, *, found: bool = True) -> bool:
        """Whether a pattern matches line i: what `matching_patterns` says of it, for one pattern.

        When the pattern's screen `found` the line, the screen is the pattern itself
        (`CompiledSpec.exact`) and it sees the line as the rules do (`BlockText.clean`),
        that finding is the answer.
        """
        if found and pid in self.c.exact and self.t.clean(i):
            return True
        atoms = self.c.atom_map.get(pid)
        if atoms is not None:
            lower = self._lower.get(i)
            if lower is None:
                lower = self._lower[i] = [f.translate(ASCII_LOWER) for f in self.frames(i)]
            return any(w in low for low in lower for w in atoms)
        regexp = single_regex(self.c, pid)._regexp  # not the wrapper's search(): it costs more than the match
        return any(regexp.Match(UNANCHORED, data, 0, len(data))[0][0] >= 0 for data in self.utf8(i))

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
        search, buf = locator(self.c, pid), t.buf
        while pos < hi:
            at = search(UNANCHORED, buf, pos, hi)[0][0]
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
