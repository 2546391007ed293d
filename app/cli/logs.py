"""Logs as the CLI reads them: gzip found by its magic bytes (standard input too), binary data refused,
and a progress line on a terminal while a large input is read."""

from __future__ import annotations

import contextlib
import gzip
import io
import re
import sys
import time
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TextIO

import click

from app.core.engine import GZIP_MAGIC, SNIFF, check_text
from app.errors import NotText

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

PROGRESS_FROM = 16 << 20  # smaller inputs are read before anyone would wait for a progress line
PROGRESS_EVERY = 0.25  # seconds between updates


def _read_up_to(stream: BinaryIO, n: int) -> bytes:
    """Up to n bytes: a pipe may hand them over a few at a time."""
    parts, got = [], 0
    while got < n:
        part = stream.read(n - got)
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


class _Joined(io.RawIOBase):
    """The bytes already looked at, then the rest of the stream."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self.head = memoryview(head)
        self.rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer, /) -> int:
        view = memoryview(buffer).cast("B")
        if self.head:
            n = min(len(view), len(self.head))
            view[:n] = self.head[:n]
            self.head = self.head[n:]
            return n
        data = self.rest.read(len(view))
        view[: len(data)] = data
        return len(data)


class ProgressLine:
    """A line on a terminal saying how much of a large log has been read, and how fast.

    Called with a log's name and its bytes read (scanned) so far; says nothing below
    PROGRESS_FROM bytes, nor more often than every PROGRESS_EVERY seconds, nor anywhere
    but on a terminal.
    """

    def __init__(self, out: TextIO | None) -> None:
        self.out = out
        self.name: str | None = None
        self.started = time.monotonic()
        self.shown_at = 0.0
        self.shown = False

    def __call__(self, name: str | None, done: int) -> None:
        if self.out is None:
            return
        now = time.monotonic()
        if name != self.name:  # the next log: its rate counts from here
            self.name, self.started = name, now
        if done >= PROGRESS_FROM and now - self.shown_at >= PROGRESS_EVERY:
            self.shown_at = now
            rate = done / max(now - self.started, 1e-3)
            self.out.write(f"\r\x1b[Kreading {name or 'the log'}: {_size(done)} ({_size(rate)}/s)")
            self.out.flush()
            self.shown = True

    def reading(self, name: str | None, blocks: Iterable[bytes]) -> Iterator[bytes]:
        """The blocks, told as they are read."""
        done = 0
        for block in blocks:
            done += len(block)
            self(name, done)
            yield block

    def clear(self) -> None:
        """Take the progress line away, so the report starts on a clean line."""
        if self.out is not None and self.shown:
            self.out.write("\r\x1b[K")
            self.out.flush()
            self.shown = False


def _size(n: float) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} bytes"


def _rewinds(stream: BinaryIO) -> bool:
    """Whether a stream can be read again from where it is (a regular file, not a pipe)."""
    try:
        return stream.seekable()
    except (OSError, ValueError):
        return False


def open_log(stream: BinaryIO) -> BinaryIO:
    """A log ready to diagnose: gunzipped when it starts with gzip's magic, refused (NotText) when
    it is not text.

    A stream that can be read again from where it was (a regular file, standard input from one)
    is handed back itself, rewound, once its first bytes are judged: the engine maps a file
    instead of reading it through copies (a 1 GB log took twice as long).
    """
    at = stream.tell() if _rewinds(stream) else None
    head = _read_up_to(stream, SNIFF)
    if head.startswith(GZIP_MAGIC):
        # assignment: GzipFile is a binary file but not a BinaryIO in typeshed.
        unzipped: BinaryIO = gzip.GzipFile(fileobj=io.BufferedReader(_Joined(head, stream)), mode="rb")  # type: ignore[assignment]
        head = _read_up_to(unzipped, SNIFF)
        check_text(head)
        return io.BufferedReader(_Joined(head, unzipped), buffer_size=1 << 20)
    check_text(head)
    if at is not None:
        stream.seek(at)
        return stream
    return io.BufferedReader(_Joined(head, stream), buffer_size=1 << 20)


def terminal() -> TextIO | None:
    """Standard error when it is a terminal (progress is for people, not for CI logs)."""
    return sys.stderr if sys.stderr.isatty() else None


_URL = re.compile(r"^(?:https?|s3|gs|ftp)://", re.IGNORECASE)


def _empty(path: Path) -> bool:
    try:
        return path.stat().st_size == 0 and path.is_file()
    except OSError:
        return False


@contextlib.contextmanager
def open_logs(paths: tuple[str, ...]) -> Iterator[list[tuple[str | None, BinaryIO]]]:
    """The logs, each gunzipped when it is gzip (standard input too) and refused when it is not text."""
    with contextlib.ExitStack() as stack:
        opened: list[tuple[str | None, BinaryIO]] = []
        for p in paths:
            if p == "-":
                name, stream = "<stdin>", sys.stdin.buffer
            else:
                if _URL.match(p):
                    raise click.UsageError(
                        f"{p} is a URL; tracelore reads files and standard input: curl -sL '{p}' | tracelore diagnose -"
                    )
                path = Path(p)
                if path.is_dir():
                    raise click.UsageError(f"{p} is a directory; pass log files")
                try:
                    stream = stack.enter_context(gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb"))
                except OSError as exc:
                    raise click.UsageError(f"cannot read {p}: {exc.strerror or exc}") from exc
                name = p
            if len(paths) > 1 and p != "-" and path.suffix != ".gz" and _empty(path):  # alone: an error below
                click.echo(f"note: {p} is empty (0 bytes): it holds nothing to diagnose", err=True)
            try:
                opened.append((name, open_log(stream)))
            except NotText as exc:
                raise click.UsageError(f"{name}: {exc.detail}") from None
        yield opened


@contextlib.contextmanager
def progress_line() -> Iterator[ProgressLine]:
    """A progress line on standard error when it is a terminal, taken away at the end."""
    shown = ProgressLine(terminal())
    try:
        yield shown
    finally:
        shown.clear()  # no progress line left under the report


def written(paths: tuple[str, ...]) -> datetime | None:
    """When the log files were last written (local time, as logs print it): the year of times without one."""
    times = []
    for p in paths:
        if p != "-":
            with contextlib.suppress(OSError):
                times.append(Path(p).stat().st_mtime)
    return datetime.fromtimestamp(max(times)) if times else None
