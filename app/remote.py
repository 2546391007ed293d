"""Remote mode of `tracelore diagnose`: send a log (or its evidence) to a Tracelore server.

Only the standard library (urllib): the CLI needs no HTTP client dependency.
A 429 or 503 with Retry-After is waited out when the wait is short, and reported
clearly when it is not.
"""

from __future__ import annotations

import email.utils
import gzip
import json
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from app import __version__
from app.core.stored import StoredDiagnosis

TIMEOUT = 120  # seconds for one request: the server diagnoses before it answers


class RemoteError(Exception):
    """The server could not be reached or refused the log; the message says why and what to do."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def padded_log(lines: Iterable[tuple[int, str]]) -> bytes:
    """An excerpt as a log that keeps the original line numbers: an empty line for each line left out.

    The reader skips empty lines but counts them, and a run of newlines gzips to almost nothing.
    """
    out: list[bytes] = []
    last = 0
    for no, text in lines:
        out.append(b"\n" * (no - last - 1) + text.encode("utf-8", errors="replace") + b"\n")
        last = no
    return b"".join(out)


def human_size(n: int) -> str:
    """1536 -> '1.5 KB'."""
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.0f} {unit}" if n >= 10 * size else f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def _multipart(filename: str, payload: bytes, fields: dict[str, str]) -> tuple[bytes, str]:
    boundary = "tracelore-" + secrets.token_hex(16)
    safe = filename.replace('"', "_").replace("\r", "_").replace("\n", "_")
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{safe}"\r\n'
        "Content-Type: application/gzip\r\n\r\n".encode()
        + payload
        + b"\r\n"
    )
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def _problem(body: bytes) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return body[:300].decode("utf-8", errors="replace").strip()
    if isinstance(data, dict):
        return str(data.get("detail") or data.get("title") or data)[:1000]
    return str(data)[:300]


def _when(seconds: float) -> str:
    at = datetime.fromtimestamp(time.time() + seconds, UTC)
    if seconds < 120:
        return f"in {seconds:.0f} s"
    return f"in {seconds / 60:.0f} min (at {at:%H:%M} UTC)" if seconds < 7200 else f"at {at:%Y-%m-%d %H:%M} UTC"


def _base(server: str) -> str:
    parsed = urllib.parse.urlsplit(server)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise RemoteError(f"--server must be an http(s) URL such as https://tracelore.example.org, not {server!r}")
    return server.rstrip("/")


def _headers(api_key: str | None, **extra: str) -> dict[str, str]:
    headers = {"Accept": "application/json", "User-Agent": f"tracelore/{__version__}", **extra}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def fetch_spec(server: str, *, api_key: str | None = None) -> dict[str, Any] | None:
    """The evidence selection rules the server publishes; None if it publishes none (an older server)."""
    url = _base(server) + "/api/v1/signatures/prefilter.json"
    request = urllib.request.Request(url, headers=_headers(api_key), method="GET")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:  # noqa: S310 - scheme checked
            spec = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 405):
            return None
        raise RemoteError(f"the server did not give its selection rules ({exc.code}: {_problem(exc.read())})") from None
    except urllib.error.URLError as exc:
        raise RemoteError(f"cannot reach {server}: {exc.reason}") from None
    except (TimeoutError, ConnectionError) as exc:
        raise RemoteError(f"cannot reach {server}: {exc}") from None
    except ValueError as exc:
        raise RemoteError(f"the server's selection rules are not JSON: {exc}") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("patterns"), list):
        raise RemoteError("the server's selection rules are not in a form this client reads; use --full")
    return spec


def post_excerpt(
    server: str,
    lines: Iterable[tuple[int, str]],
    *,
    total_lines: int,
    total_bytes: int,
    filename: str,
    top: int | None = None,
    **options: Any,
) -> StoredDiagnosis:
    """POST the evidence lines of a log with their original numbers (JSON, gzip-encoded)."""
    document: dict[str, Any] = {
        "excerpt": [{"line": no, "text": text} for no, text in lines],
        "total_lines": total_lines,
        "total_bytes": total_bytes,
        "name": filename,
        "store": True,
    }
    if top is not None:
        document["top"] = top
    body = gzip.compress(json.dumps(document).encode("utf-8"), 6, mtime=0)
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    return _post(server, body, headers, **options)


def post_log(server: str, log: bytes, *, filename: str, top: int | None = None, **options: Any) -> StoredDiagnosis:
    """POST a whole log (gzip-compressed, as a multipart file) and return the stored diagnosis."""
    fields = {"store": "true"}
    if top is not None:
        fields["top"] = str(top)
    body, content_type = _multipart(filename, gzip.compress(log, 6, mtime=0), fields)
    return _post(server, body, {"Content-Type": content_type}, **options)


def _post(
    server: str,
    body: bytes,
    content_headers: dict[str, str],
    *,
    api_key: str | None = None,
    max_wait: float = 60,
    attempts: int = 3,
    sleep: Callable[[float], None] = time.sleep,
    notify: Callable[[str], None] | None = None,
) -> StoredDiagnosis:
    """POST to SERVER/api/v1/diagnoses, waiting out a short Retry-After; return the stored diagnosis (its `url`)."""
    url = _base(server) + "/api/v1/diagnoses"
    headers = _headers(api_key, **content_headers)
    for attempt in range(1, attempts + 1):
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as response:  # noqa: S310 - scheme checked
                data = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = _problem(exc.read())
            wait = retry_after_seconds(exc.headers.get("Retry-After"))
            if exc.code in (429, 503):
                what = "the daily allowance on this server is used up" if exc.code == 429 else "the server is busy"
                if wait is not None and wait <= max_wait and attempt < attempts:
                    if notify:
                        notify(f"{what} ({exc.code}); retrying in {wait:.0f} s as the server asks (Retry-After)")
                    sleep(wait)
                    continue
                retry = f"; try again {_when(wait)}" if wait is not None else ""
                raise RemoteError(f"{what} ({exc.code}: {detail}){retry}", status=exc.code, retry_after=wait) from None
            if exc.code == 401:
                raise RemoteError(f"the server refused the API key (401: {detail})", status=401) from None
            raise RemoteError(f"the server refused the log ({exc.code}: {detail})", status=exc.code) from None
        except urllib.error.URLError as exc:
            raise RemoteError(f"cannot reach {server}: {exc.reason}") from None
        except (TimeoutError, ConnectionError) as exc:
            raise RemoteError(f"cannot reach {server}: {exc}") from None
        except ValueError as exc:
            raise RemoteError(f"the server's answer is not a diagnosis (invalid JSON: {exc})") from None
        try:
            return StoredDiagnosis.model_validate(data)
        except ValueError as exc:
            raise RemoteError(f"the server's answer is not a diagnosis: {str(exc)[:300]}") from None
    raise RemoteError("the server kept asking to retry; giving up")  # pragma: no cover - loop always returns
