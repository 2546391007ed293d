"""Who is asking: an account (through its signed session cookie or an API key) or an anonymous client address.

Anonymous callers are counted by client address, hashed with the server secret so the
database never holds an address; IPv6 clients by their /64, which one household gets.
The address is the TCP peer's: `X-Forwarded-For` counts only from the proxies listed in
TRACELORE_FORWARDED_ALLOW_IPS, which uvicorn applies (none by default).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fastapi import Request
from sqlalchemy.exc import SQLAlchemyError
from starlette.datastructures import URL

from app.config import Settings
from app.errors import BadInput, Forbidden, NotReady, Unauthorized
from app.store.accounts import Account, ApiKey, key_account, server_secret, session_account, utcnow

SESSION_COOKIE = "tracelore_session"
CSRF_COOKIE = "tracelore_csrf"
KEY_PARAMS = ("api_key", "apikey", "key", "token", "access_token")


@dataclass(frozen=True, slots=True)
class Subject:
    """Who is asking, and on which tier."""

    id: str = "anonymous"  # "account:<id>" or "ip:<keyed hash>"
    tier: str = "anonymous"
    account: Account | None = None
    key: ApiKey | None = None


def clock(request: Request) -> datetime:
    """Now, from the app's clock (tests replace app.state.clock to move days)."""
    now: Callable[[], datetime] = getattr(request.app.state, "clock", utcnow)
    return now()


def secret(request: Request) -> bytes:
    """The key that signs cookies and hashes addresses: the setting, or one kept in the database."""
    state = request.app.state
    cached: bytes | None = getattr(state, "secret", None)
    if cached is None:
        settings: Settings = state.settings
        if settings.secret_key:
            cached = settings.secret_key.encode()
        else:
            try:
                with state.sessionmaker.begin() as session:
                    cached = server_secret(session, now=clock(request)).encode()
            except SQLAlchemyError as exc:
                raise NotReady(
                    f"the database is not reachable ({type(exc).__name__})", headers={"Retry-After": "5"}
                ) from None
        state.secret = cached
    return cached


def sign(key: bytes, value: str, purpose: str) -> str:
    """value.signature, the signature bound to a purpose."""
    mac = hmac.new(key, f"{purpose}:{value}".encode(), hashlib.sha256).digest()[:18]
    return f"{value}.{base64.urlsafe_b64encode(mac).decode()}"


def unsign(key: bytes, signed: str, purpose: str) -> str | None:
    """The value of a signed string, or None if the signature does not match."""
    value, _, _mac = signed.rpartition(".")
    if not value or len(signed) > 512:
        return None
    return value if hmac.compare_digest(sign(key, value, purpose), signed) else None


def client_network(host: str) -> str:
    """The address a client is counted by: IPv4 as is, IPv6 by its /64."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host[:100]
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is None:
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(getattr(address, "ipv4_mapped", None) or address)


def anonymous_id(key: bytes, host: str) -> str:
    """The subject id of an anonymous client address."""
    mac = hmac.new(key, f"client:{client_network(host)}".encode(), hashlib.sha256).hexdigest()
    return f"ip:{mac[:32]}"


def session_token(request: Request) -> str | None:
    """The session token of a signed session cookie, if the signature holds."""
    cookie = request.cookies.get(SESSION_COOKIE)
    return unsign(secret(request), cookie, "session") if cookie else None


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, credentials = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        raise Unauthorized(
            "the Authorization header must be `Bearer <API key>`; create a key on the account page",
            headers={"WWW-Authenticate": 'Bearer realm="tracelore"'},
        )
    return credentials.strip()


def needs_database(request: Request) -> bool:
    """Whether resolve_subject may query the database: an API key, a session cookie or no secret yet."""
    return (
        "authorization" in request.headers
        or SESSION_COOKIE in request.cookies
        or getattr(request.app.state, "secret", None) is None
    )


def resolve_subject(request: Request) -> Subject:
    """The caller: API key, then session cookie, then client address (blocking: a dependency run in a thread)."""
    if any(p in request.query_params for p in KEY_PARAMS):
        raise BadInput("send API keys in the Authorization header (`Bearer <key>`), never in the URL")
    sessions = request.app.state.sessionmaker
    now = clock(request)
    presented = _bearer(request)
    if presented is not None:
        with sessions.begin() as session:
            found = key_account(session, presented, now=now)
        if found is None:
            raise Unauthorized(
                "this API key is unknown or has been revoked; create a new one on the account page",
                headers={"WWW-Authenticate": 'Bearer realm="tracelore", error="invalid_token"'},
            )
        key, account = found
        return Subject(id=f"account:{account.id}", tier=account.tier, account=account, key=key)
    token = session_token(request)
    if token:
        with sessions.begin() as session:
            signed_in = session_account(session, token, now=now)
        if signed_in:
            return Subject(id=f"account:{signed_in.id}", tier=signed_in.tier, account=signed_in)
    host = request.client.host if request.client else "unknown"
    return Subject(id=anonymous_id(secret(request), host), tier="anonymous")


def csrf_seed(request: Request) -> str | None:
    """What a form's CSRF token is bound to: the browser's CSRF cookie."""
    return request.cookies.get(CSRF_COOKIE) or getattr(request.state, "csrf_seed", None)


def csrf_token(request: Request) -> str:
    """The token forms carry in their `csrf` field."""
    seed = csrf_seed(request)
    if not seed:
        return ""
    return sign(secret(request), seed, "csrf").rpartition(".")[2]


def same_origin(request: Request) -> bool:
    """False when a browser says the request comes from another site (Fetch Metadata, then Origin)."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    # Host names only: behind a TLS-terminating proxy the app may see http and another port.
    return URL(origin).hostname == URL(str(request.base_url)).hostname


SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def check_origin(request: Request) -> None:
    """Refuse a form posted from another site."""
    if not same_origin(request):
        raise Forbidden("this form was posted from another site; open Tracelore and submit it from there")


async def check_form_origin(request: Request) -> None:
    """The one origin check of the pages: every state-changing request outside the API (an app dependency).

    The API is exempt: its clients are not browsers carrying someone's cookies, and a browser
    cannot send it a cross-site DELETE or a JSON POST without a CORS preflight, which it refuses.
    """
    if request.method not in SAFE_METHODS and not request.url.path.startswith("/api/"):
        check_origin(request)


def check_csrf(request: Request, form: Any) -> None:
    """Refuse a form without a valid CSRF token (its origin is checked for every form by check_form_origin)."""
    sent = str(form.get("csrf") or "")
    expected = csrf_token(request)
    if not sent or not expected or not hmac.compare_digest(sent, expected):
        raise Forbidden("the form has expired or did not come from this site; reload the page and submit it again")
