"""Errors Tracelore raises on purpose, each with an HTTP status and a problem type.

    TraceloreError
    ├── BadInput          400  malformed request or log
    │   ├── EmptyLog      422  nothing to diagnose
    │   ├── Invalid       422  well-formed but invalid fields or options
    │   └── NotText       415  binary data, not a text log
    │   └── SlowBody      408  the request body did not arrive in time
    ├── UnsupportedType   415  wrong content type or encoding
    ├── TooLarge          413  over a size limit (says which)
    ├── Unauthorized      401  unknown, malformed or revoked API key (with WWW-Authenticate)
    ├── Forbidden         403  a form without its CSRF token, or posted from another site
    ├── NotFound          404
    ├── QuotaSpent        429  daily allowance used up
    ├── Overloaded        503  too many diagnoses in flight (with Retry-After)
    ├── NotReady          503  a dependency (database, library) is unavailable
    └── LibraryError      500  the signature library is broken (at start-up, never per request)

The web layer renders any of these as application/problem+json; the CLI prints
`detail` and exits 2.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class TraceloreError(Exception):
    """Base of every deliberate error."""

    status = 500
    type = "about:blank"
    title = "Internal error"

    def __init__(
        self, detail: str, *, headers: Mapping[str, str] | None = None, extra: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.headers = dict(headers or {})  # sent with the HTTP response, e.g. Retry-After
        self.extra = dict(extra or {})  # extension members of the problem document


class BadInput(TraceloreError):
    status = 400
    type = "/problems/bad-input"
    title = "Malformed input"


class EmptyLog(BadInput):
    status = 422
    type = "/problems/empty-log"
    title = "Empty log"


class Invalid(BadInput):
    status = 422
    type = "/problems/invalid"
    title = "Invalid request"


class NotText(BadInput):
    status = 415
    type = "/problems/not-text"
    title = "Not a text log"


class SlowBody(BadInput):
    status = 408
    type = "/problems/slow-body"
    title = "Request body too slow"


class UnsupportedType(TraceloreError):
    status = 415
    type = "/problems/unsupported-media-type"
    title = "Unsupported media type"


class TooLarge(TraceloreError):
    status = 413
    type = "/problems/too-large"
    title = "Log too large"


class Unauthorized(TraceloreError):
    status = 401
    type = "/problems/unauthorized"
    title = "Not authorised"


class Forbidden(TraceloreError):
    status = 403
    type = "/problems/forbidden"
    title = "Forbidden"


class NotFound(TraceloreError):
    status = 404
    type = "/problems/not-found"
    title = "Not found"


class QuotaSpent(TraceloreError):
    status = 429
    type = "/problems/quota-spent"
    title = "Daily allowance used up"


class Overloaded(TraceloreError):
    status = 503
    type = "/problems/overloaded"
    title = "Too many diagnoses in progress"


class NotReady(TraceloreError):
    status = 503
    type = "/problems/not-ready"
    title = "Service not ready"


@dataclass(frozen=True, slots=True)
class Issue:
    """One problem in a signature file, located."""

    path: Path
    line: int | None
    message: str
    severity: str = "error"
    check: str | None = None  # the id of the lint check that found it (`tracelore lint --list-checks`)

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else str(self.path)
        kind = f"{self.severity}[{self.check}]" if self.check else self.severity
        return f"{where}: {kind}: {self.message}"


class LibraryError(TraceloreError):
    """The signature library cannot be loaded; carries every issue found."""

    type = "/problems/library"
    title = "Signature library error"

    def __init__(self, issues: list[Issue]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(i) for i in issues))
