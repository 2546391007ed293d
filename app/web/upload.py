"""Read a log out of a request without trusting it: bounded while streaming, gzip decoded with a cap.

Accepted bodies: `text/plain` (or `application/octet-stream`, or no type), `application/gzip`,
`application/json` (`{"log": ..., "store": ..., "top": ...}`, or `{"excerpt": [{"line": n, "text": ...}, ...],
"total_lines": ..., "total_bytes": ..., "name": ...}` for lines picked out of a larger log) and `multipart/form-data`
(a `file` part or a `log` field, plus optional `store` and `top` fields). `Content-Encoding: gzip`
works with all of them. The body is spooled to memory and, past 1 MiB, to a temporary file.
"""

from __future__ import annotations

import io
import json
import os
import re
import tempfile
import zlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import anyio.to_thread
from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from python_multipart.multipart import parse_options_header
from starlette.datastructures import FormData, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from app.core.excerpt import Excerpt
from app.errors import BadInput, Invalid, TooLarge, UnsupportedType

READ_CHUNK = 64 << 10  # decompressed bytes produced per step
SPOOL_MEMORY = 1 << 20  # a body stays in memory up to this size, then goes to a temporary file
ENVELOPE = 1 << 20  # multipart framing allowed on top of the log size
# The largest line number or size a request may give: the largest integer every JSON client
# (JavaScript's Number) holds exactly, and far beyond any real log.
MAX_COUNT = 2**53 - 1

TEXT_TYPES = {"", "text/plain", "text/x-log", "application/octet-stream"}
GZIP_TYPES = {"application/gzip", "application/x-gzip"}
JSON_TYPES = {"application/json"}
MULTIPART_TYPES = {"multipart/form-data"}
ACCEPTED = "text/plain, application/gzip, application/json or multipart/form-data"


def human_bytes(n: int) -> str:
    """1048576 -> '1 MiB'; any integer, however large (a stored diagnosis may hold one)."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            # Integer arithmetic: n / size overflows a float past about 10**308.
            tenths = (n * 10 + size // 2) // size
            whole, tenth = divmod(tenths, 10)
            return f"{whole} {unit}" if tenth == 0 else f"{whole}.{tenth} {unit}"
    return f"{n} bytes"


def too_large(limit: int, what: str = "the log") -> TooLarge:
    """The 413 error, saying the limit and what to do."""
    return TooLarge(
        f"{what} is larger than the limit of {human_bytes(limit)} ({limit} bytes); "
        "send the end of the log instead, e.g. `tail -c 20M train.log`",
        extra={"limit": limit},
    )


class ExcerptLine(BaseModel):
    """One line of an excerpt: its number in the original log and its text."""

    model_config = ConfigDict(extra="forbid")

    line: int = Field(ge=1, le=MAX_COUNT, description="1-based line number in the original log")
    text: str = Field(description="the line, without its newline")


class JsonUpload(BaseModel):
    """A log sent as JSON: the whole text (`log`), or an excerpt picked out of a larger log."""

    model_config = ConfigDict(extra="forbid")

    log: str | None = Field(None, description="the log text")
    excerpt: list[ExcerptLine] | None = Field(
        None, description="lines picked out of a larger log, in order, with their original numbers"
    )
    total_lines: int | None = Field(None, ge=0, le=MAX_COUNT, description="with `excerpt`: lines in the original log")
    total_bytes: int | None = Field(None, ge=0, le=MAX_COUNT, description="with `excerpt`: size of the original log")
    name: str | None = Field(None, max_length=1000, description="with `excerpt`: the original file name")
    store: bool | None = Field(None, description="keep a permalink (default true)")
    top: int | None = Field(None, ge=1, le=100, description="at most this many candidates")

    @model_validator(mode="after")
    def _one_log(self) -> JsonUpload:
        if (self.log is None) == (self.excerpt is None):
            raise ValueError("send either `log` (the text) or `excerpt` (picked-out lines), not both or neither")
        return self

    def to_excerpt(self) -> Excerpt:
        """The excerpt as the core takes it; raise `Invalid` if its numbering is impossible."""
        lines = tuple((e.line, e.text) for e in self.excerpt or ())
        last = lines[-1][0] if lines else 0
        total_lines = self.total_lines if self.total_lines is not None else last
        total_bytes = self.total_bytes if self.total_bytes is not None else sum(len(t) + 1 for _, t in lines)
        excerpt = Excerpt(lines=lines, total_lines=total_lines, total_bytes=total_bytes)
        excerpt.check()
        return excerpt


@dataclass
class Upload:
    """A log read from a request, ready for the core: a seekable binary file and options."""

    file: IO[bytes]
    name: str | None = None
    store: bool | None = None
    top: int | None = None
    excerpt: Excerpt | None = None  # lines picked out of a larger log; `file` holds their text
    _closers: list[IO[bytes]] = field(default_factory=list)

    def close(self) -> None:
        """Delete spooled data."""
        self.file.close()
        for f in self._closers:
            f.close()


class BoundedGunzip:
    """Decompress gzip (several members too) without ever producing more than a cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.total = 0
        self._d = zlib.decompressobj(wbits=31)
        self._fed = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        """Decompressed pieces of data; raise TooLarge past the cap, BadInput on corrupt data."""
        buf = data
        while buf:
            self._fed = True
            if self._d.eof:  # the next gzip member
                self._d = zlib.decompressobj(wbits=31)
            try:
                out = self._d.decompress(buf, READ_CHUNK)
            except zlib.error as exc:
                raise BadInput(f"the gzip data is corrupt ({exc}); check the file with `gzip -t`") from exc
            self.total += len(out)
            if self.total > self.cap:
                raise too_large(self.cap, "the decompressed log")
            if out:
                yield out
            buf = self._d.unused_data if self._d.eof else self._d.unconsumed_tail

    def finish(self) -> None:
        """Check the stream ended on a complete member."""
        if self._fed and not self._d.eof:
            raise BadInput("the gzip data is truncated; check the file with `gzip -t`")


class Spool:
    """Collect bytes in memory, then in a temporary file, writing to disk off the event loop."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._file: IO[bytes] | None = None
        self.size = 0

    async def write(self, data: bytes) -> None:
        self.size += len(data)
        self._buffer += data
        if len(self._buffer) >= SPOOL_MEMORY:
            await self._flush()

    async def _flush(self) -> None:
        if self._file is None:
            self._file = await anyio.to_thread.run_sync(tempfile.TemporaryFile)
        data, self._buffer = bytes(self._buffer), bytearray()
        await anyio.to_thread.run_sync(self._file.write, data)

    async def finish(self) -> IO[bytes]:
        """The spooled bytes as a file at offset 0."""
        if self._file is None:
            return io.BytesIO(bytes(self._buffer))
        await self._flush()
        self._file.seek(0)
        return self._file

    def discard(self) -> None:
        if self._file is not None:
            self._file.close()


def gunzip_file(source: IO[bytes], limit: int) -> IO[bytes]:
    """Decompress a gzip file into a temporary file, never past the limit (blocking)."""
    source.seek(0)
    gunzip = BoundedGunzip(limit)
    out = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY)  # noqa: SIM115 - closed by the Upload
    try:
        while block := source.read(READ_CHUNK):
            for piece in gunzip.feed(block):
                out.write(piece)
        gunzip.finish()
    except BaseException:
        out.close()
        raise
    out.seek(0)
    return out  # type: ignore[return-value]


def _content_length(request: Request) -> int | None:
    values = request.headers.getlist("content-length")
    if not values:
        return None
    if len(set(values)) > 1:
        raise BadInput("conflicting Content-Length headers")
    try:
        length = int(values[0])
    except ValueError:
        raise BadInput("Content-Length is not a number") from None
    if length < 0:
        raise BadInput("Content-Length is negative")
    return length


def _encoding(request: Request) -> bool:
    """True if the body is gzip-encoded; raise for encodings we do not decode."""
    value = request.headers.get("content-encoding", "").strip().lower()
    if value in ("", "identity"):
        return False
    if value in ("gzip", "x-gzip"):
        return True
    raise UnsupportedType(
        f"Content-Encoding {value!r} is not supported; send the log uncompressed or with Content-Encoding: gzip"
    )


def media_type(request: Request) -> tuple[str, dict[bytes, bytes]]:
    """The request's media type, lower case, and its parameters."""
    raw = request.headers.get("content-type", "")
    if len(raw) > 1024:
        raise BadInput("the Content-Type header is too long")
    kind, params = parse_options_header(raw)
    return kind.decode("latin-1").strip().lower(), params


async def _body(request: Request, *, wire_cap: int, log_cap: int, gzip: bool) -> AsyncIterator[bytes]:
    """The request body, counted as it arrives and decompressed with a cap."""
    received = 0
    gunzip = BoundedGunzip(log_cap) if gzip else None
    async for chunk in request.stream():
        received += len(chunk)
        if received > wire_cap:
            raise too_large(min(wire_cap, log_cap), "the request body")
        if gunzip is None:
            yield chunk
        else:
            for out in gunzip.feed(chunk):
                yield out
    if gunzip is not None:
        gunzip.finish()


def _safe_name(name: str | None) -> str | None:
    """A file name fit to show: the base name only, printable, bounded. Never used as a path."""
    if not name:
        return None
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(ch for ch in base if ch.isprintable())[:200].strip()
    return base or None


def _option_bool(value: Any, name: str) -> bool | None:
    if value is None or value == "":
        return None
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise Invalid(f"{name}: expected true or false, got {str(value)[:40]!r}")


def _option_int(value: Any, name: str) -> int | None:
    if value is None or value == "":
        return None
    try:
        number = int(str(value).strip())
    except ValueError:
        raise Invalid(f"{name}: expected a whole number, got {str(value)[:40]!r}") from None
    if not 1 <= number <= 100:
        raise Invalid(f"{name}: must be between 1 and 100")
    return number


async def read_upload(request: Request, *, limit: int) -> Upload:
    """Read and bound the log in a request; raise a TraceloreError for anything unacceptable."""
    gzip = _encoding(request)
    kind, _params = media_type(request)
    if kind in GZIP_TYPES:
        if gzip:
            raise UnsupportedType("the body is application/gzip and also Content-Encoding: gzip; send one of the two")
        kind, gzip = "text/plain", True
    if kind in TEXT_TYPES:
        wire_cap = limit
    elif kind in JSON_TYPES:
        wire_cap = 2 * limit + 1024  # JSON escaping (\n, \", \uXXXX) can double a log's size
    elif kind in MULTIPART_TYPES:
        wire_cap = limit + ENVELOPE
    else:
        hint = " (curl sends that for -d; add -H 'Content-Type: text/plain')" if "form-urlencoded" in kind else ""
        raise UnsupportedType(f"Content-Type {kind!r} is not accepted{hint}; send {ACCEPTED}")
    length = _content_length(request)
    if length is not None and length > wire_cap and not gzip:
        raise too_large(limit, "the request body")
    if length is not None and gzip and length > limit:
        raise too_large(limit, "the compressed request body")
    body = _body(request, wire_cap=wire_cap, log_cap=limit, gzip=gzip)
    if kind in MULTIPART_TYPES:
        return await _read_multipart(request, body, limit)
    if kind in JSON_TYPES:
        return await _read_json(body)
    spool = Spool()
    try:
        async for chunk in body:
            await spool.write(chunk)
        return Upload(await spool.finish())
    except BaseException:
        spool.discard()
        raise


async def _read_json(body: AsyncIterator[bytes]) -> Upload:
    data = bytearray()
    async for chunk in body:
        data += chunk
    try:
        parsed = await anyio.to_thread.run_sync(json.loads, bytes(data))
    except (ValueError, RecursionError) as exc:
        # ValueError covers JSONDecodeError, bad UTF-8 and over-long integers.
        raise BadInput(f"the body is not valid JSON: {str(exc)[:200]}") from None
    try:
        request = JsonUpload.model_validate(parsed)
    except ValidationError as exc:
        errors = [{"location": ".".join(map(str, e["loc"])) or "body", "message": e["msg"]} for e in exc.errors()]
        raise Invalid(
            "; ".join(f"{e['location']}: {e['message']}" for e in errors)
            + ' (expected {"log": "..."} or {"excerpt": [{"line": 1, "text": "..."}]})',
            extra={"errors": errors},
        ) from None
    if request.excerpt is not None:
        excerpt = request.to_excerpt()
        name = _safe_name(request.name)
        return Upload(io.BytesIO(excerpt.data()), name=name, store=request.store, top=request.top, excerpt=excerpt)
    log = (request.log or "").encode("utf-8", errors="replace")
    return Upload(io.BytesIO(log), store=request.store, top=request.top)


class _StrictMultiPartParser(MultiPartParser):
    """Starlette's parser, refusing what it would otherwise misread as a form without a file.

    A body cut before its closing boundary parses without error (the last part is dropped), and
    a part named only by `filename*=` (RFC 7578 forbids it in forms) is taken for a text field.
    """

    ended = False

    def on_headers_finished(self) -> None:
        disposition = (self._current_part.content_disposition or b"").lower()
        if b"filename*" in disposition and not _PLAIN_FILENAME.search(disposition):
            raise MultiPartException(
                "a part names its file only with `filename*=`, which multipart/form-data does not use "
                '(RFC 7578); send `filename="train.log"`'
            )
        super().on_headers_finished()

    def on_end(self) -> None:
        self.ended = True

    async def parse(self) -> FormData:
        form = await super().parse()
        if not self.ended:
            for file in self._files_to_close_on_error:  # the cut part's file is in no form item
                file.close()
            await form.close()
            raise MultiPartException("the body ends before its closing boundary; the upload was cut short")
        return form


_PLAIN_FILENAME = re.compile(rb"(?:^|;)\s*filename\s*=")


async def _read_multipart(request: Request, body: AsyncIterator[bytes], limit: int) -> Upload:
    parser = _StrictMultiPartParser(request.headers, body, max_files=1, max_fields=8, max_part_size=limit)
    try:
        form = await parser.parse()
    except MultiPartException as exc:
        if "maximum size" in exc.message:  # a pasted `log` field over the limit
            raise too_large(limit) from None
        raise BadInput(f"malformed multipart body: {exc.message}") from None
    closers: list[IO[bytes]] = []
    try:
        part = form.get("file")
        text = form.get("log")
        store = _option_bool(form.get("store"), "store")
        top = _option_int(form.get("top"), "top")
        if isinstance(part, UploadFile):
            closers.append(part.file)
            part.file.seek(0, os.SEEK_END)
            size = part.file.tell()
            part.file.seek(0)
            if size > limit:
                raise too_large(limit)
            if size or not text:
                file: IO[bytes] = part.file
                if file.read(2) == b"\x1f\x8b":  # a .gz file chosen in the form
                    file = await anyio.to_thread.run_sync(gunzip_file, part.file, limit)
                    closers.append(file)
                file.seek(0)
                return Upload(file, name=_safe_name(part.filename), store=store, top=top, _closers=closers)
        if isinstance(text, str):
            return Upload(io.BytesIO(text.encode("utf-8", errors="replace")), store=store, top=top, _closers=closers)
        raise Invalid("the form has no `file` part and no `log` field")
    except BaseException:
        for f in closers:
            f.close()
        await form.close()
        raise
