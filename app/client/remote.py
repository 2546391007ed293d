"""Remote mode of `tracelore diagnose`: send a log (or its evidence) to a Tracelore server.

Only the standard library: the CLI needs no HTTP client dependency. Each request is one
bounded exchange (`app.client.http`): no redirect is followed, the answer is read up to a cap,
all within one deadline, and whatever the server says is neutralised before it is shown.
A 429 or 503 with Retry-After is waited out when the wait is short, and reported
clearly when it is not.
"""

from __future__ import annotations

import email.utils
import gzip
import http.client
import json
import secrets
import time
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from app import __version__
from app.client.http import Answer, exchange, neutral
from app.core.stored import StoredDiagnosis
from app.errors import AnswerTooLarge, DeadlinePassed, RemoteError

TIMEOUT = 120  # seconds for one request, answer and all: the server diagnoses before it answers


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


def _multipart(files: Iterable[tuple[str, bytes]], fields: dict[str, str]) -> tuple[bytes, str]:
    """A multipart/form-data body: the fields, then one `file` part per (filename, gzip payload)."""
    boundary = "tracelore-" + secrets.token_hex(16)
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields.items()
    ]
    for filename, payload in files:
        safe = filename.replace('"', "_").replace("\r", "_").replace("\n", "_")
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{safe}"\r\n'
            "Content-Type: application/gzip\r\n\r\n".encode()
            + payload
            + b"\r\n"
        )
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def _problem(body: bytes) -> str:
    """What a refusal says, neutralised: never more than a few lines, never a terminal escape."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return neutral(body[:300].decode("utf-8", errors="replace").strip())
    if isinstance(data, dict):
        return neutral(str(data.get("detail") or data.get("title") or "")[:1000] or "no detail")
    return neutral(str(type(data).__name__))


def _json(body: bytes, what: str) -> Any:
    """An answer's JSON with every string neutralised; a RemoteError for anything else."""
    try:
        return _neutral_strings(json.loads(body))
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else f"invalid JSON: {neutral(str(exc))[:200]}"
        raise RemoteError(f"the server's answer is not {what} ({reason})") from None


def _neutral_strings(value: Any) -> Any:
    if isinstance(value, str):
        return neutral(value)
    if isinstance(value, list):
        return [_neutral_strings(v) for v in value]
    if isinstance(value, dict):
        return {neutral(str(k)): _neutral_strings(v) for k, v in value.items()}
    return value


def _send(
    method: str, url: str, server: str, *, headers: dict[str, str], body: bytes | None = None, timeout: float
) -> Answer:
    """One exchange; a RemoteError for a server that cannot be reached, is too slow, or answers too much."""
    try:
        answer = exchange(method, url, headers=headers, body=body, timeout=timeout)
    except DeadlinePassed:
        raise RemoteError(f"{server} did not answer in full within {timeout:g} s; try again later") from None
    except AnswerTooLarge as exc:
        raise RemoteError(f"{server} answered with too much data: {exc}") from None
    except (OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise RemoteError(f"cannot reach {server}: {neutral(reason)}") from None
    if 300 <= answer.status < 400:
        location = neutral(answer.header("Location") or "nowhere")[:300]
        raise RemoteError(
            f"the server answered {answer.status}, redirecting to {location}; redirects are not followed "
            "(the API key and the log go only to the address you gave): use the address it names as --server "
            "if you trust it",
            status=answer.status,
        )
    return answer


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


def fetch_spec(server: str, *, api_key: str | None = None, timeout: float = TIMEOUT) -> dict[str, Any] | None:
    """The evidence selection rules the server publishes; None if it publishes none (an older server)."""
    url = _base(server) + "/api/v1/signatures/prefilter.json"
    answer = _send("GET", url, server, headers=_headers(api_key), timeout=timeout)
    if answer.status in (404, 405):
        return None
    if answer.status >= 400:
        raise RemoteError(f"the server did not give its selection rules ({answer.status}: {_problem(answer.body)})")
    spec = _json(answer.body, "selection rules")
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
    return post_logs(server, [(filename, log)], top=top, **options)


def post_logs(
    server: str, logs: Sequence[tuple[str, bytes]], *, top: int | None = None, **options: Any
) -> StoredDiagnosis:
    """POST the logs of one job (one per rank), each a gzip-compressed multipart file, as the API
    takes several files; return the stored diagnosis of them together."""
    fields = {"store": "true"}
    if top is not None:
        fields["top"] = str(top)
    body, content_type = _multipart(((name, gzip.compress(log, 6, mtime=0)) for name, log in logs), fields)
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
    timeout: float = TIMEOUT,
) -> StoredDiagnosis:
    """POST to SERVER/api/v1/diagnoses, waiting out a short Retry-After; return the stored diagnosis (its `url`).

    Each attempt, answer and all, ends within `timeout` seconds.
    """
    url = _base(server) + "/api/v1/diagnoses"
    headers = _headers(api_key, **content_headers)
    for attempt in range(1, attempts + 1):
        answer = _send("POST", url, server, headers=headers, body=body, timeout=timeout)
        if answer.status >= 400:
            detail = _problem(answer.body)
            wait = retry_after_seconds(answer.header("Retry-After"))
            if answer.status in (429, 503):
                what = "the daily allowance on this server is used up" if answer.status == 429 else "the server is busy"
                if wait is not None and wait <= max_wait and attempt < attempts:
                    if notify:
                        notify(f"{what} ({answer.status}); retrying in {wait:.0f} s as the server asks (Retry-After)")
                    sleep(wait)
                    continue
                retry = f"; try again {_when(wait)}" if wait is not None else ""
                raise RemoteError(f"{what} ({answer.status}: {detail}){retry}", status=answer.status, retry_after=wait)
            if answer.status == 401:
                raise RemoteError(f"the server refused the API key (401: {detail})", status=401)
            raise RemoteError(f"the server refused the log ({answer.status}: {detail})", status=answer.status)
        data = _json(answer.body, "a diagnosis")
        try:
            return StoredDiagnosis.model_validate(data)
        except (ValueError, RecursionError) as exc:
            raise RemoteError(f"the server's answer is not a diagnosis: {neutral(str(exc))[:300]}") from None
    raise RemoteError("the server kept asking to retry; giving up")  # pragma: no cover - loop always returns
