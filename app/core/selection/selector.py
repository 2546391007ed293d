"""The selection rules applied in Python (the CLI's remote mode): a log read as blocks, in
bounded memory, to the `Excerpt` the browser would send.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from app.core.selection.blocks import BlockPass, BlockText, Screened
from app.core.selection.excerpt import Excerpt
from app.core.selection.screens import AHEAD, FOLD, UNANCHORED, compile_spec, locator, matching_patterns


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

    def __init__(self, spec: Mapping[str, Any], *, scan_map: Callable[..., Iterable[Any]] = map) -> None:
        self._c = compile_spec(spec)
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
        for pid in sorted(matching_patterns(self._c, text)):
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

    def screen(self, block: bytes, size: int) -> Screened | None:
        """Start judging block[:size]: its lines are found and its slices handed to the screen.

        The block's text (escape sequences removed) is scanned in slices by one RE2 Set of
        every pattern, loosened to match a superset of the lines the pattern matches
        (`rewrites.byte_superset`). With an executor's `scan_map` the slices are scanned by
        its threads (RE2 releases the GIL) while this thread judges the block before.
        """
        if not size:
            return None
        text = BlockText(self._c, block, size)
        last_newline = block[size - 1] == 10
        if text.ends is None:  # escape rules that would join lines: judged line by line
            return Screened(text, block, size, last_newline, None)
        slices = text.slices()
        found = self.scan_map(lambda span: self._scan(text.buf, span), slices)
        return Screened(text, block, size, last_newline, zip(slices, found, strict=True))

    def _scan(self, buf: bytes, span: tuple[int, int]) -> tuple[Sequence[int], dict[int, tuple[list[int], int | None]]]:
        """What the screen finds in one slice, and where the patterns still short of their cap are in it.

        Runs in the executor's threads: RE2 releases the GIL while it searches, so the
        patterns are located there, ahead of the thread that judges blocks in order. Their
        counts may be behind (blocks before this one are still being judged): a pattern
        is located here up to what it may still need (`AHEAD` at most); `BlockPass.located`
        takes over from where this stopped.
        """
        c, s, e = self._c, span[0], span[1]
        found = c.screen.match(memoryview(buf)[s:e]) or ()
        ahead: dict[int, tuple[list[int], int | None]] = {}
        cap = int(c.rules["per_pattern"])
        for idx in found:
            pid = c.screen_ids[idx]
            budget = min(cap - self.counts.get(pid, 0), AHEAD)
            if pid == FOLD or pid in c.progress or budget <= 0:
                continue
            search, at, pos, resume = locator(c, pid), [], s, None
            while pos < e:
                start = search(UNANCHORED, buf, pos, e)[0][0]
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

    def judge(self, screened: Screened | None) -> None:
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
        BlockPass(self, text).run(screened.found)
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
        ahead: Screened | None = None  # the next block is screened while this one is judged
        for data, size in _whole_lines(blocks):
            ends_with_newline = data[size - 1] == 10
            screened = selector.screen(data, size)
            selector.judge(ahead)
            ahead = screened
        selector.judge(ahead)
    return selector.excerpt(ends_with_newline=ends_with_newline)
