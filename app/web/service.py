"""What happens to an accepted log: checked for text, diagnosed off the event loop, prepared for storage."""

from __future__ import annotations

import contextlib
import hashlib
import time
import zlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

import anyio
import anyio.to_thread

from app.config import usable_cores
from app.core.diagnose import diagnose, diagnose_many
from app.core.excerpt import Excerpt, diagnose_excerpt, excerpt_windows
from app.core.library import Library
from app.core.models import Diagnosis
from app.core.reader import decode, iter_chunks, strip_ansi
from app.core.redact import DEFAULT, Redactor, count_placeholders
from app.core.sniff import SNIFF, check_text
from app.errors import Overloaded
from app.store.diagnoses import Window, WindowLine
from app.web.jsonbody import ExcerptBody
from app.web.metrics import Metrics

MAX_WINDOW_LINES = 2000  # context lines kept per diagnosis, whatever the evidence


def diagnosis_threads() -> int:
    """Worker threads that diagnose at once in one process: one per core this process may use.

    Diagnosing is CPU work under the GIL: more threads than cores do not diagnose more logs a
    second, they take turns (every thread's log finishes late) and keep the event loop and the
    short database transactions waiting for the GIL.
    """
    return usable_cores()


QUEUE_PER_SLOT = 16  # requests that may wait for a slot, per slot: each holds at most a spool buffer


class Gate:
    """Admission for diagnoses: at most `limit` in flight in this process; more wait briefly, then are refused.

    A request that finds every slot taken waits up to `wait` seconds for one, in arrival order,
    so a burst a little larger than the slots is served late rather than shed; at most
    `QUEUE_PER_SLOT * limit` wait at once, and the rest are refused at once with 503.
    Of those admitted, at most `threads` diagnose at once; the others wait their turn for a thread
    (after their count is settled), so a burst is served at full speed in turn.
    """

    def __init__(self, limit: int, retry_after: int, *, wait: float = 0.0, threads: int | None = None) -> None:
        self.limit = limit
        self.retry_after = retry_after
        self.wait = wait
        self.busy = 0  # touched only from the event loop
        self.waiting = 0
        self.threads = max(1, min(limit, threads or diagnosis_threads()))
        self._limiter: anyio.CapacityLimiter | None = None  # made on first use, inside the event loop
        self._freed: anyio.Event | None = None

    @property
    def limiter(self) -> anyio.CapacityLimiter:
        """The worker threads diagnoses run in (separate from the pool database calls use)."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.threads)
        return self._limiter

    def _refuse(self) -> Overloaded:
        return Overloaded(
            f"{self.busy} diagnoses are already running on this server; try again in {self.retry_after} s",
            headers={"Retry-After": str(self.retry_after)},
        )

    def check(self) -> None:
        """Refuse now if every slot is taken and the queue is full (before reading a body we could not serve)."""
        if self.busy >= self.limit and (self.wait <= 0 or self.waiting >= QUEUE_PER_SLOT * self.limit):
            raise self._refuse()

    async def _acquire(self) -> None:
        if self.busy < self.limit and not self.waiting:
            self.busy += 1
            return
        self.check()
        self.waiting += 1
        try:
            with anyio.move_on_after(self.wait):
                # Woken whenever a slot is freed; the first waiter in line that finds one free takes it.
                while self.busy >= self.limit:
                    if self._freed is None:
                        self._freed = anyio.Event()
                    await self._freed.wait()
                self.busy += 1
                return
        finally:
            self.waiting -= 1
        raise self._refuse()

    def _release(self) -> None:
        self.busy -= 1
        if self._freed is not None:
            self._freed.set()
            self._freed = None

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one slot for the duration of a diagnosis, waiting up to `wait` seconds for it."""
        await self._acquire()
        try:
            yield
        finally:
            self._release()


@dataclass(frozen=True)
class Analysis:
    """A diagnosed log and what may be stored of it."""

    diagnosis: Diagnosis
    windows: list[Window]
    input_bytes: int
    input_sha256: str
    log_gz: bytes | None


def _hash(files: Sequence[BinaryIO]) -> tuple[int, str]:
    """Size and SHA-256 of the logs, one after the other (of the one log, when there is one)."""
    digest = hashlib.sha256()
    size = 0
    for file in files:
        while block := file.read(1 << 20):
            digest.update(block)
            size += len(block)
        file.seek(0)
    return size, digest.hexdigest()


def _compress_redacted(logs: Sequence[tuple[str | None, BinaryIO]], redactor: Redactor) -> tuple[bytes, dict[str, int]]:
    """The whole log as kept: decoded, ANSI stripped, secrets redacted line by line, gzip-compressed.

    Several logs are kept one after the other (by name), each under a `==> name <==` line (as `tail` prints them).
    """
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)
    stream = redactor.stream()
    parts = []
    for name, file in logs:
        if len(logs) > 1:
            parts.append(packer.compress(f"==> {name} <==\n".encode()))
        for chunk in iter_chunks(file):
            # The whole chunk at once: one scan finds the few lines a rule could touch.
            text = chunk.data.decode("utf-8", errors="replace").replace("\x00", "").replace("\x1b", "")
            parts.append(packer.compress(redactor.text(text, stream).text.encode("utf-8")))
        file.seek(0)
    parts.append(packer.flush())
    return b"".join(parts), dict(sorted(stream.counts.items()))


def _wanted(
    diagnosis: Diagnosis, context: int, name: str | None = None, *, every: bool = True
) -> list[tuple[int, int]]:
    """Spans of lines around the evidence and unexplained lines (of file `name` unless `every`)."""
    lines = {e.line for c in diagnosis.candidates for e in c.evidence if every or e.file == name}
    lines |= {u.line for u in diagnosis.unexplained if every or u.file == name}
    spans: list[tuple[int, int]] = []
    for no in sorted(lines):
        start, end = max(1, no - context), no + context
        if spans and start <= spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    return spans


def evidence_windows(
    file: BinaryIO, diagnosis: Diagnosis, *, context: int, name: str | None, every: bool = True
) -> list[Window]:
    """The log lines around every evidence and unexplained line: what is kept of the log by default.

    With `every` false, only the lines the diagnosis places in file `name` (a job of several files).
    """
    spans = _wanted(diagnosis, context, name, every=every)
    if not spans:
        return []
    texts: dict[int, str] = {}
    budget = MAX_WINDOW_LINES
    for chunk in iter_chunks(file, file=name):
        first, last = chunk.first_line, chunk.first_line + chunk.newlines
        if not any(s <= last and e >= first for s, e in spans):
            continue
        for i, physical in enumerate(chunk.data.split(b"\n")):
            no = first + i
            if no > last or (i == 0 and chunk.mid_frame) or no in texts:
                continue
            if any(s <= no <= e for s, e in spans) and budget > 0:
                frames = [f for f in physical.split(b"\r") if f.strip()] or [b""]
                texts[no] = decode(frames[-1])[0]
                budget -= 1
    file.seek(0)
    windows: list[Window] = []
    for start, end in spans:
        lines = [WindowLine(no=no, text=texts[no]) for no in range(start, end + 1) if no in texts]
        if lines:
            windows.append(Window(file=name, lines=lines))
    return windows


def excerpt_evidence_windows(excerpt: Excerpt, diagnosis: Diagnosis, *, context: int, name: str | None) -> list[Window]:
    """`evidence_windows` for an excerpt: the lines it holds around the evidence, by original number."""
    windows: list[Window] = []
    budget = MAX_WINDOW_LINES
    for span in excerpt_windows(excerpt, _wanted(diagnosis, context)):
        lines = []
        for no, text in span[: max(0, budget)]:
            frames = [f for f in strip_ansi(text.encode("utf-8", errors="replace")).split(b"\r") if f.strip()]
            lines.append(WindowLine(no=no, text=decode(frames[-1] if frames else b"")[0]))
        budget -= len(lines)
        if lines:
            windows.append(Window(file=name, lines=lines))
    return windows


def analyse(
    logs: Sequence[tuple[str | None, BinaryIO]],
    library: Library,
    *,
    top: int | None,
    context: int,
    keep_log: bool,
    metrics: Metrics,
    redactor: Redactor = DEFAULT,
    excerpt: Excerpt | None = None,
) -> Analysis:
    """Check, hash, diagnose and redact the logs of one job (blocking: run it in a worker thread).

    Several logs (one per rank) are diagnosed as one job, each keeping its name and line numbers.
    With `excerpt` (lines picked out of a larger log; the one file holds their text), line numbers
    and sizes in the diagnosis are the original log's.

    Nothing leaves this function unredacted: the diagnosis is built from redacted lines,
    the file names, the context windows and the kept log are redacted here.
    """
    # By name (distinct when there are several): the hash and the kept log never depend on upload order.
    logs = sorted(logs, key=lambda log: log[0] or "")
    for _, file in logs:
        check_text(file.read(SNIFF))
        file.seek(0)
    size, sha256 = _hash([file for _, file in logs])
    logs = [(redactor.line(name).text if name is not None else None, file) for name, file in logs]
    started = time.perf_counter()
    if excerpt is not None:
        diagnosis = diagnose_excerpt(excerpt, library, top=top, name=logs[0][0], redactor=redactor)
    elif len(logs) == 1:
        diagnosis = diagnose(logs[0][1], library, top=top, name=logs[0][0], redactor=redactor)
    else:
        diagnosis = diagnose_many(logs, library, top=top, redactor=redactor)
    metrics.diagnosis(time.perf_counter() - started, ((c.id, c.role) for c in diagnosis.candidates))
    windows: list[Window] = []
    for name, file in logs:
        file.seek(0)
        if excerpt is not None:
            windows += excerpt_evidence_windows(excerpt, diagnosis, context=context, name=name)
        else:
            windows += evidence_windows(file, diagnosis, context=context, name=name, every=len(logs) == 1)
    windows = redact_windows(windows, redactor)
    log_gz, log_counts = _compress_redacted(logs, redactor) if keep_log else (None, {})
    counts = shown_counts(diagnosis, windows, log_counts)
    if counts != diagnosis.redactions:
        diagnosis = diagnosis.model_copy(update={"redactions": counts})
    return Analysis(diagnosis=diagnosis, windows=windows, input_bytes=size, input_sha256=sha256, log_gz=log_gz)


def redact_windows(windows: list[Window], redactor: Redactor) -> list[Window]:
    """Context windows with secrets replaced; a PEM key spanning lines of a window goes whole."""
    out = []
    for window in windows:
        stream = redactor.stream()
        lines = [WindowLine(no=line.no, text=stream.line(line.text)) for line in window.lines]
        out.append(Window(file=window.file, lines=lines))
    return out


def shown_counts(diagnosis: Diagnosis, windows: list[Window], log_counts: dict[str, int]) -> dict[str, int]:
    """Secrets removed from everything kept of a log, by type: each line counted once."""
    texts: dict[tuple[str | None, int], str] = {}
    for c in diagnosis.candidates:
        for e in c.evidence:
            texts[(e.file, e.line)] = e.text
    for u in diagnosis.unexplained:
        texts[(u.file, u.line)] = u.text
    for w in windows:
        for line in w.lines:
            texts[(w.file, line.no)] = line.text
    ordered = [texts[k] for k in sorted(texts, key=lambda k: (k[0] or "", k[1]))]
    counts = count_placeholders([*ordered, *diagnosis.input.files])
    for kind, n in log_counts.items():
        counts[kind] = max(counts.get(kind, 0), n)
    return dict(sorted(counts.items()))


async def run_analysis(
    gate: Gate,
    logs: Sequence[tuple[str | None, BinaryIO]],
    library: Library,
    *,
    top: int | None,
    context: int,
    keep_log: bool,
    metrics: Metrics,
    redactor: Redactor = DEFAULT,
    excerpt: ExcerptBody | None = None,
) -> Analysis:
    """Diagnose (and redact) in a worker thread, holding one of the gate's slots.

    An excerpt's lines are loaded only once the slot is held: the slots bound that memory.
    """
    async with gate.slot():
        metrics.add_in_flight(1)
        try:
            analysis = await anyio.to_thread.run_sync(
                lambda: analyse(
                    logs,
                    library,
                    top=top,
                    context=context,
                    keep_log=keep_log,
                    metrics=metrics,
                    redactor=redactor,
                    excerpt=excerpt.load(logs[0][1]) if excerpt is not None else None,
                ),
                limiter=gate.limiter,
            )
        finally:
            metrics.add_in_flight(-1)
    return analysis
