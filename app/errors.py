"""Every error class of Tracelore (the CLI's own, a click exception, is in `app/cli/errors.py`).

Errors raised on purpose, each with an HTTP status and a problem type:

    TraceloreError
    ├── BadInput          400  malformed request or log
    │   ├── EmptyLog      422  nothing to diagnose
    │   ├── Invalid       422  well-formed but invalid fields or options
    │   └── NotText       415  binary data, not a text log
    │   └── SlowBody      408  the request body did not arrive in time
    ├── UnsupportedType   415  wrong content type or encoding
    ├── TooLarge          413  over a size limit (says which)
    ├── Unauthorized      401  unknown, malformed or revoked API key (with WWW-Authenticate)
    ├── SignInFirst       401  a page or action for signed-in accounts
    ├── Forbidden         403  a form without its CSRF token, or posted from another site
    ├── AdminsOnly        403  a page for admins
    ├── NotOwner          403  deleting a diagnosis someone else made
    ├── NotFound          404
    ├── QuotaSpent        429  daily allowance used up
    ├── MailLimit         429  too many sign-in links asked for (503 once the service-wide limit is reached)
    ├── Overloaded        503  too many diagnoses in flight (with Retry-After)
    ├── NotReady          503  a dependency (database, library) is unavailable
    ├── LibraryError      500  the signature library is broken (at start-up, never per request)
    └── CorpusError       500  the corpus on disk is malformed (`tracelore corpus`, `tracelore eval`)

The web layer renders any of these as application/problem+json; the CLI prints
`detail` and exits 2.

Errors that never reach an HTTP answer: the core's `OverBudget` (a redaction out of work) and
`AuthoringError` (an excerpt or signature file that cannot be used as asked), and the remote
client's `RemoteError` (the server could not be reached or refused the log), with the two ways
one exchange fails below it, `DeadlinePassed` and `AnswerTooLarge`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self


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

    def amended(
        self, *, detail: str, headers: Mapping[str, str] | None = None, extra: Mapping[str, Any] | None = None
    ) -> Self:
        """A new error of this class saying `detail` (with `headers`, `extra` when given); this one is unchanged.

        Subclasses take other arguments (or none), so the new error is made as a copy, not through `__init__`.
        """
        amended = type(self).__new__(type(self))
        amended.__dict__.update(vars(self))
        amended.args = (detail,)
        amended.detail = detail
        amended.headers = dict(self.headers if headers is None else headers)
        amended.extra = dict(self.extra if extra is None else extra)
        return amended.with_traceback(self.__traceback__)  # where it was raised, as the logs show it


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


class SignInFirst(TraceloreError):
    """401: a page or action for signed-in accounts."""

    status = 401
    type = "/problems/unauthorized"
    title = "Sign in first"

    def __init__(self) -> None:
        super().__init__("sign in first: open /account and ask for a sign-in link")


class Forbidden(TraceloreError):
    status = 403
    type = "/problems/forbidden"
    title = "Forbidden"


class AdminsOnly(TraceloreError):
    """403: a page for admins."""

    status = 403
    type = "/problems/forbidden"
    title = "Admins only"

    def __init__(self) -> None:
        super().__init__("this page is for admins: `tracelore admin set-admin EMAIL` grants it to a signed-in account")


class NotOwner(TraceloreError):
    """403: only the maker of a diagnosis (its delete token or its account) may delete it."""

    status = 403
    type = "/problems/not-owner"
    title = "Not the owner"


class NotFound(TraceloreError):
    status = 404
    type = "/problems/not-found"
    title = "Not found"


class QuotaSpent(TraceloreError):
    status = 429
    type = "/problems/quota-spent"
    title = "Daily allowance used up"


class MailLimit(TraceloreError):
    """429 (503 when the service-wide limit is reached): too many sign-in links this hour; `retry_after` seconds."""

    status = 429
    type = "/problems/too-many-sign-in-links"
    title = "Too many sign-in links"

    def __init__(self, detail: str, *, status: int = 429, retry_after: int | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.retry_after = retry_after


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


class CorpusError(TraceloreError):
    """The corpus on disk is malformed (each problem located by case)."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        more = f" (+{len(self.problems) - 5} more)" if len(self.problems) > 5 else ""
        super().__init__("; ".join(self.problems[:5]) + more)


class OverBudget(Exception):
    """Redacting took more work than it was allowed (see `app.core.redaction.redactor.Budget`)."""


class AuthoringError(ValueError):
    """The excerpt or the signature file cannot be used as asked; the message says why."""


class RemoteError(Exception):
    """The server could not be reached or refused the log; the message says why and what to do."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class DeadlinePassed(TimeoutError):
    """The exchange did not end before its deadline."""


class AnswerTooLarge(ValueError):
    """The server's answer is larger than the client reads."""
