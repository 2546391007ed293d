"""One HTTP exchange with a Tracelore server, trusting nothing it sends back.

The standard library only (http.client): the CLI needs no HTTP client dependency. urllib's
opener, used before, followed redirects to any host with the `Authorization` header on (and
turned a POST into a GET on 301-303, losing the upload), read an answer whole whatever its
size, and had only a per-read timeout, so an answer trickling in a byte a second never ended
(issue #38). Here:

* redirects are never followed: the caller reports them (the API key goes only where the user said);
* an answer is read in pieces and given up past `max_bytes` (a `Content-Length` over it at once);
* the whole exchange (connecting, sending, every byte of the answer) has one deadline: a timer
  shuts the socket down when it passes, whatever the server is doing;
* text from the server is shown only through `neutral()`, which writes control characters and
  invisible or reordering ones as escapes, so an answer cannot drive the terminal (move the
  cursor, rewrite a line, set the clipboard with OSC 52, hide text).
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
import unicodedata
import urllib.parse
from dataclasses import dataclass
from email.message import Message

from app.errors import AnswerTooLarge, DeadlinePassed

MAX_ANSWER = 16 << 20  # a diagnosis's JSON is a few hundred KB; a selection spec less
PIECE = 64 << 10

# Characters that act on a terminal or hide and reorder text: C0 and C1 controls (ESC starts
# every escape sequence; 0x9b is CSI on its own), DEL, and Unicode format characters (bidi
# overrides and isolates, zero-width characters), line and paragraph separators.
_HIDDEN = {"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"}


def neutral(text: str) -> str:
    """Text from a server made safe to print: line breaks and tabs kept, every other control,
    invisible or reordering character written as a `\\xNN` / `\\uXXXX` escape."""
    if text.isprintable() or all(ch in "\n\t" or ch.isprintable() for ch in text):
        return text
    out = []
    for ch in text:
        if ch not in "\n\t" and unicodedata.category(ch) in _HIDDEN:
            point = ord(ch)
            out.append(
                f"\\x{point:02x}" if point < 0x100 else f"\\u{point:04x}" if point <= 0xFFFF else f"\\U{point:08x}"
            )
        else:
            out.append(ch)
    return "".join(out)


@dataclass
class Answer:
    """A server's answer: its status, headers and body (at most the size asked for)."""

    status: int
    headers: Message
    body: bytes

    def header(self, name: str) -> str | None:
        value = self.headers.get(name)
        return None if value is None else str(value)


def exchange(
    method: str,
    url: str,
    *,
    headers: dict[str, str],
    body: bytes | None = None,
    timeout: float,
    max_bytes: int = MAX_ANSWER,
) -> Answer:
    """Send one request and read its answer, all within `timeout` seconds; redirects are returned, not followed.

    Raises DeadlinePassed, AnswerTooLarge, or OSError (and http.client.HTTPException) when the
    server cannot be reached or breaks the protocol.
    """
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    target = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
    started = time.monotonic()
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(host, parts.port, timeout=timeout, context=ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(host, parts.port, timeout=timeout)
    fired = threading.Event()

    def cut() -> None:  # the deadline: whatever the exchange is waiting for ends now
        fired.set()
        sock = conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    timer = threading.Timer(timeout, cut)
    timer.daemon = True
    timer.start()
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(conn.close)
        cleanup.callback(timer.cancel)  # the timer cancelled first, then the connection closed
        try:
            conn.request(method, target, body=body, headers=headers)
            response = conn.getresponse()
            length = response.getheader("Content-Length")
            if length is not None and length.strip().isdigit() and int(length) > max_bytes:
                raise AnswerTooLarge(
                    f"the answer is {int(length):,} bytes, more than the {max_bytes:,} this client reads"
                )
            pieces: list[bytes] = []
            size = 0
            while piece := response.read1(PIECE):
                size += len(piece)
                if size > max_bytes:
                    raise AnswerTooLarge(f"the answer is more than the {max_bytes:,} bytes this client reads")
                pieces.append(piece)
            if fired.is_set():
                raise DeadlinePassed(f"no complete answer within {timeout:g} s")
            return Answer(response.status, response.headers, b"".join(pieces))
        except (OSError, http.client.HTTPException) as exc:
            if fired.is_set() or time.monotonic() - started >= timeout:
                raise DeadlinePassed(f"no complete answer within {timeout:g} s") from None
            raise exc
