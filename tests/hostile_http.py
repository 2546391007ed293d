"""A real HTTP server, on a real socket, that answers as a test scripts it: the adversary the client meets.

Each connection is read up to the end of its request (headers and a `Content-Length` body) and
handed with its socket to the test's `answer` function, which writes whatever it likes: a
redirect, an answer that never ends, one that trickles, escape sequences. What each request
was is kept in `requests`.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

Answer = Callable[[socket.socket, bytes], None]


@dataclass
class HostileServer:
    answer: Answer
    host: str = "127.0.0.1"
    requests: list[bytes] = field(default_factory=list)
    _sock: socket.socket | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    @property
    def port(self) -> int:
        assert self._sock is not None
        return int(self._sock.getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        threading.Thread(target=self._serve, daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        if self._sock is not None:
            self._sock.close()

    def _serve(self) -> None:
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(30)
            try:
                request = _read_request(conn)
                self.requests.append(request)
                self.answer(conn, request)
            except OSError:
                pass  # the client hung up: what it is meant to do with most of these answers


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


@contextlib.contextmanager
def hostile(answer: Answer, *, host: str = "127.0.0.1") -> Iterator[HostileServer]:
    """A hostile server for the length of a block (`host` names it in its URL: `localhost` is another host)."""
    server = HostileServer(answer, host=host)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def respond(status: str, body: bytes = b"", headers: dict[str, str] | None = None) -> Answer:
    """An answer that sends one complete response."""

    def answer(conn: socket.socket, _request: bytes) -> None:
        fields = {"Content-Type": "application/json", "Content-Length": str(len(body)), **(headers or {})}
        head = f"HTTP/1.1 {status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n"
        conn.sendall(head.encode("latin-1") + body)

    return answer
