"""Read a log out of a request without trusting it: bounded while streaming, gzip decoded with a cap.

Accepted bodies: `text/plain` (or `application/octet-stream`, or no type), `application/gzip` (a log, or a
tar of logs), `application/json` (`{"log": ..., "store": ..., "top": ...}`, or `{"excerpt": [{"line": n,
"text": ...}, ...], "total_lines": ..., "total_bytes": ..., "name": ...}` for lines picked out of a larger
log) and `multipart/form-data` (one or more `file` parts, each a log, a `.gz` or a `.tar.gz` of logs, or a
`log` field, plus optional `store` and `top` fields). `Content-Encoding: gzip` works with all of them.

Every route holds the decoded log to the caller's limit, and nothing is held whole in memory: bodies
and decoded logs are spooled to memory and, past 1 MiB, to temporary files; JSON is parsed as it
arrives (`app.web.jsonbody`).
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from tempfile import SpooledTemporaryFile, TemporaryFile
from typing import Any, BinaryIO

import anyio.to_thread
from fastapi import Request
from python_multipart.multipart import parse_options_header
from starlette.datastructures import FormData, Headers, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from app.errors import BadInput, Invalid, TooLarge, UnsupportedType
from app.web.archive import FILE_MEMORY, MAX_FILES, BoundedGunzip, Log, close_logs, is_tar, unpack
from app.web.jsonbody import SPOOL_MEMORY, JsonBody, too_large
from app.web.sizes import human_bytes
from app.web.upload_fields import ExcerptBody

ENVELOPE = 1 << 20  # multipart framing allowed on top of the log size
FEED = 256 << 10  # JSON text parsed per step in a worker thread
OPTION_FIELD = 1024  # bytes of a `store` or `top` form field

TEXT_TYPES = {"", "text/plain", "text/x-log", "application/octet-stream"}
GZIP_TYPES = {"application/gzip", "application/x-gzip"}
JSON_TYPES = {"application/json"}
MULTIPART_TYPES = {"multipart/form-data"}
ACCEPTED = "text/plain, application/gzip, application/json or multipart/form-data"

__all__ = ["Upload", "human_bytes", "media_type", "read_upload", "too_large"]


@dataclass
class Upload:
    """The logs read from a request, ready for the core: seekable binary files, their names, and options."""

    files: list[Log]
    store: bool | None = None
    top: int | None = None
    excerpt: ExcerptBody | None = None  # lines picked out of a larger log; the one file holds their text
    _closers: list[BinaryIO] = field(default_factory=list)

    def close(self) -> None:
        """Delete spooled data."""
        close_logs(self.files)
        for f in self._closers:
            f.close()


class Spool:
    """Collect bytes in memory, then in a temporary file, writing to disk off the event loop."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._file: BinaryIO | None = None
        self.size = 0

    async def write(self, data: bytes) -> None:
        self.size += len(data)
        self._buffer += data
        if len(self._buffer) >= SPOOL_MEMORY:
            await self._flush()

    async def _flush(self) -> None:
        if self._file is None:
            self._file = await anyio.to_thread.run_sync(TemporaryFile)
        data, self._buffer = bytes(self._buffer), bytearray()
        await anyio.to_thread.run_sync(self._file.write, data)

    async def finish(self) -> BinaryIO:
        """The spooled bytes as a file at offset 0."""
        if self._file is None:
            return io.BytesIO(bytes(self._buffer))
        await self._flush()
        self._file.seek(0)
        return self._file

    def discard(self) -> None:
        if self._file is not None:
            self._file.close()


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


async def _body(
    request: Request, *, wire_cap: int, log_cap: int, gzip: bool, limit: int
) -> AsyncGenerator[bytes, None]:
    """The request body, counted as it arrives and decompressed with a cap."""
    received = 0
    gunzip = BoundedGunzip(log_cap, limit) if gzip else None
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
    """Read and bound the logs in a request; raise a TraceloreError for anything unacceptable."""
    gzip = _encoding(request)
    kind, _params = media_type(request)
    gzip_body = False
    if kind in GZIP_TYPES:
        if gzip:
            raise UnsupportedType("the body is application/gzip and also Content-Encoding: gzip; send one of the two")
        kind, gzip, gzip_body = "text/plain", True, True
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
    # A decompressed JSON or form body may be as large as its uncompressed wire form; the log
    # inside is held to `limit` as it is decoded. A tar's own headers come on top of its logs.
    cap = limit if kind in TEXT_TYPES and not gzip_body else wire_cap + (ENVELOPE if gzip_body else 0)
    body = _body(request, wire_cap=wire_cap, log_cap=cap, gzip=gzip, limit=limit)
    if kind in MULTIPART_TYPES:
        return await _read_multipart(request, body, limit)
    if kind in JSON_TYPES:
        return await _read_json(body, limit)
    spool = Spool()
    with contextlib.ExitStack() as on_error:
        on_error.callback(spool.discard)
        async for chunk in body:
            await spool.write(chunk)
        file = await spool.finish()
        on_error.pop_all()
    if gzip_body and is_tar(file):  # a .tar.gz of per-rank logs
        with file:  # its logs are spooled apart
            return Upload(await _unpack_all([(None, file)], limit))
    if spool.size > limit:
        file.close()
        raise too_large(limit)
    return Upload([(None, file)])


async def _read_json(body: AsyncIterator[bytes], limit: int) -> Upload:
    parser = JsonBody(limit)
    with contextlib.ExitStack() as on_error:
        on_error.callback(parser.file.close)
        pending = bytearray()
        async for chunk in body:
            pending += chunk
            if len(pending) >= FEED:
                await anyio.to_thread.run_sync(parser.feed, bytes(pending))
                pending.clear()
        await anyio.to_thread.run_sync(parser.feed, bytes(pending))
        options = await anyio.to_thread.run_sync(parser.finish)
        on_error.pop_all()
    name = _safe_name(options.name) if parser.excerpt is not None else None
    return Upload([(name, parser.file)], store=options.store, top=options.top, excerpt=parser.excerpt)


class _FormParser(MultiPartParser):
    """Starlette's form parser, refusing what it would otherwise misread as a form without a file,
    with the pasted `log` field spooled like a file, never held in memory.

    A body cut before its closing boundary parses without error (the last part is dropped), and
    a part named only by `filename*=` (RFC 7578 forbids it in forms) is taken for a text field.
    """

    spool_max_size = FILE_MEMORY  # up to MAX_FILES parts: each goes to disk early
    ended = False

    def on_headers_finished(self) -> None:
        disposition = (self._current_part.content_disposition or b"").lower()
        if b"filename*" in disposition and not _PLAIN_FILENAME.search(disposition):
            raise MultiPartException(
                "a part names its file only with `filename*=`, which multipart/form-data does not use "
                '(RFC 7578); send `filename="train.log"`'
            )
        super().on_headers_finished()
        part = self._current_part
        if part.file is None and part.field_name == "log":
            spooled = SpooledTemporaryFile(max_size=self.spool_max_size)  # noqa: SIM115 - closed by the Upload
            self._files_to_close_on_error.append(spooled)
            # arg-type: SpooledTemporaryFile is a binary file but not a BinaryIO in typeshed.
            part.file = UploadFile(file=spooled, size=0, filename=None, headers=Headers(raw=part.item_headers))  # type: ignore[arg-type]

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


async def _read_multipart(request: Request, body: AsyncGenerator[bytes, None], limit: int) -> Upload:
    parser = _FormParser(request.headers, body, max_files=MAX_FILES, max_fields=8, max_part_size=OPTION_FIELD)
    try:
        form = await parser.parse()
    except MultiPartException as exc:
        raise BadInput(f"malformed multipart body: {exc.message}") from None
    async with contextlib.AsyncExitStack() as on_error:
        on_error.push_async_callback(form.close)
        store = _option_bool(_field(form.get("store")), "store")
        top = _option_int(_field(form.get("top")), "top")
        chosen = [p for p in form.getlist("file") if isinstance(p, UploadFile)]
        pasted = form.get("log")
        sized = [(p, _size(p.file)) for p in chosen]
        if isinstance(pasted, UploadFile) and not any(size for _, size in sized):
            sized = [(pasted, _size(pasted.file))]  # the pasted text, when no file was chosen
        parts = [(_safe_name(p.filename), p.file) for p, size in sized if size or len(sized) == 1]
        if not parts:
            raise Invalid("the form has no `file` part and no `log` field")
        logs = await _unpack_all(parts, limit)
        on_error.pop_all()
    # The form's files are closed with the upload: a log taken as it is stays that file.
    spooled = [v.file for _, v in form.multi_items() if isinstance(v, UploadFile)]
    return Upload(logs, store=store, top=top, _closers=spooled)


def _field(value: Any) -> Any:
    if isinstance(value, UploadFile):
        raise BadInput("`store` and `top` are form fields, not files")
    return value


def _size(file: BinaryIO) -> int:
    file.seek(0, 2)
    size = file.tell()
    file.seek(0)
    return size


async def _unpack_all(parts: list[Log], limit: int) -> list[Log]:
    """Every log in the chosen files (archives opened, gzip decoded), within `limit` in all; names unique."""

    def run() -> list[Log]:
        logs: list[Log] = []
        with contextlib.ExitStack() as on_error:
            on_error.callback(close_logs, logs)  # whatever the list holds when it fails
            for name, file in parts:
                used = sum(_size(f) for _, f in logs)
                logs.extend(unpack(file, name, limit - used, limit=limit))
                if len(logs) > MAX_FILES:
                    raise TooLarge(f"more than {MAX_FILES} logs in one diagnosis", extra={"limit": MAX_FILES})
            on_error.pop_all()
        return logs

    logs = await anyio.to_thread.run_sync(run)
    if len(logs) > 1:
        names = [name for name, _ in logs]
        if None in names or len(set(names)) < len(names):
            close_logs(logs)
            raise Invalid("several logs need a distinct file name each (the name tells their ranks apart)")
    return logs
