"""What a refused form post had in it, so the page can give it back instead of an empty box.

A refusal (the day's allowance spent, the server busy) comes before the body is read. The
page then reads at most `cap` bytes of the body, keeps the `log` field when it arrived whole
and the `file` part's name, and ignores the rest: a 50 MB file is never read to be refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapi import Request
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect

if TYPE_CHECKING:  # the parser's callback type exists only for type checkers
    from python_multipart.multipart import MultipartCallbacks


@dataclass(frozen=True)
class FormBack:
    """The form as it was sent: the pasted text (whole, or empty) and the chosen file's name."""

    text: str = ""
    file_name: str | None = None
    text_cut: bool = False  # the pasted text was longer than the cap, so it is not given back


class _Collector:
    """Multipart callbacks that keep the `log` field and the `file` part's file name."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.header_field = b""
        self.header_value = b""
        self.disposition: dict[bytes, bytes] = {}
        self.data = bytearray()
        self.complete_log: bytes | None = None
        self.file_name: str | None = None
        self.cut = False

    def on_part_begin(self) -> None:
        self.disposition, self.data = {}, bytearray()

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self.header_field += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self.header_value += data[start:end]

    def on_header_end(self) -> None:
        if self.header_field.lower() == b"content-disposition":
            self.disposition = parse_options_header(self.header_value)[1]
        self.header_field, self.header_value = b"", b""

    def on_headers_finished(self) -> None:
        if self.disposition.get(b"name") == b"file" and self.disposition.get(b"filename"):
            name = self.disposition[b"filename"].decode("utf-8", "replace")
            self.file_name = name.replace("\\", "/").rsplit("/", 1)[-1][:200] or None

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self.disposition.get(b"name") == b"log":
            self.data += data[start:end]
            if len(self.data) > self.cap:
                self.cut, self.data = True, bytearray()
                self.disposition = {}

    def on_part_end(self) -> None:
        if self.disposition.get(b"name") == b"log":
            self.complete_log = bytes(self.data)


async def form_back(request: Request, *, cap: int) -> FormBack:
    """Read what a refused multipart form carried, at most about `cap` bytes of it."""
    content_type, params = parse_options_header(request.headers.get("content-type", ""))
    boundary = params.get(b"boundary")
    if content_type != b"multipart/form-data" or not boundary:
        return FormBack()
    collector = _Collector(cap)
    callbacks: MultipartCallbacks = {
        "on_part_begin": collector.on_part_begin,
        "on_header_field": collector.on_header_field,
        "on_header_value": collector.on_header_value,
        "on_header_end": collector.on_header_end,
        "on_headers_finished": collector.on_headers_finished,
        "on_part_data": collector.on_part_data,
        "on_part_end": collector.on_part_end,
    }
    parser = MultipartParser(boundary, callbacks)
    read = 0
    try:
        async for chunk in request.stream():
            parser.write(chunk)
            read += len(chunk)
            if read > cap + 64 * 1024:  # room for the framing and the small fields
                break
    except (RuntimeError, ValueError, ClientDisconnect):
        pass  # the body was already read, is malformed, or the client left: nothing more to give back
    text = (collector.complete_log or b"").decode("utf-8", "replace")
    return FormBack(text=text, file_name=collector.file_name, text_cut=collector.cut)
