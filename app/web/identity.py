"""Who is asking: an account (through its signed session cookie or an API key) or an anonymous client address.

Anonymous callers are counted by client address, hashed with the server secret so the
database never holds an address; IPv6 clients by their /64, which one household gets.
The address is the TCP peer's: `X-Forwarded-For` counts only from the proxies listed in
TRACELORE_FORWARDED_ALLOW_IPS, which uvicorn applies (none by default).

Signing is `itsdangerous`'s: the session cookie is a `TimestampSigner` value that expires
with TRACELORE_SESSION_DAYS, a form's CSRF token a `Signer` signature of the browser's CSRF
cookie (no timestamp: that cookie ends with the browser session, and an expiry would only
refuse forms left open). TRACELORE_SECRET_KEY signs; it and TRACELORE_PREVIOUS_SECRET_KEYS verify, so keys
rotate without signing anyone out. Cookies signed before this format (a bare HMAC) no
longer verify: such a browser is signed out (its session row expires as usual) and a form
it had open asks for a reload; nothing fails.

Hand-written, because no signing library serves them: the client-address hash (a stable
keyed pseudonym that is stored and compared, never verified, and keyed by the newest key
only: rotating the key starts anonymous allowances afresh) and the same-origin checks.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fastapi import Request
from itsdangerous import BadSignature, Signer, TimestampSigner
from sqlalchemy.exc import SQLAlchemyError
from starlette.datastructures import URL

from app.config import Settings, is_loopback
from app.errors import BadInput, Forbidden, NotReady, Unauthorized
from app.quota.tiers import LOCAL
from app.store.accounts import Account, ApiKey, key_account, server_secret, session_account
from app.web.sessions import Sessions, sessions_of
from app.web.state import state_of

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
    """Now, from the app's clock (tests replace `state_of(app).clock` to move days)."""
    return state_of(request.app).clock()


def secret(request: Request) -> bytes:
    """The key that signs cookies and hashes addresses: the setting, or one kept in the database."""
    state = state_of(request.app)
    cached = state.secret
    if cached is None:
        settings: Settings = state.settings
        if settings.secret_key:
            cached = settings.secret_key.encode()
        else:
            try:
                with sessions_of(request).begin() as session:
                    cached = server_secret(session, now=clock(request)).encode()
            except SQLAlchemyError as exc:
                raise NotReady(
                    f"the database is not reachable ({type(exc).__name__})", headers={"Retry-After": "5"}
                ) from None
        state.secret = cached
    return cached


def signing_keys(request: Request) -> list[bytes]:
    """Every key a signature may carry, oldest first: itsdangerous signs with the last and tries them all."""
    settings: Settings = state_of(request.app).settings
    return [*(key.encode() for key in reversed(settings.previous_secret_keys)), secret(request)]


def session_signer(keys: Sequence[bytes]) -> TimestampSigner:
    """Signs session cookies (a timestamp inside: they expire)."""
    return TimestampSigner(list(keys), salt="tracelore.session", key_derivation="hmac", digest_method=hashlib.sha256)


def csrf_signer(keys: Sequence[bytes]) -> Signer:
    """Signs CSRF seeds; the signature alone is a form's token."""
    return Signer(list(keys), salt="tracelore.csrf", key_derivation="hmac", digest_method=hashlib.sha256)


def session_cookie(keys: Sequence[bytes], token: str) -> str:
    """The session cookie's value for a session token, signed with the newest key."""
    return session_signer(keys).sign(token).decode()


def client_network(host: str) -> str:
    """The address a client is counted by: IPv4 as is, IPv6 by its /64."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host[:100]
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is None:
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(getattr(address, "ipv4_mapped", None) or address)


@functools.lru_cache(maxsize=4096)
def anonymous_id(key: bytes, host: str) -> str:
    """The subject id of an anonymous client address (remembered: a client sends many requests)."""
    mac = hmac.new(key, f"client:{client_network(host)}".encode(), hashlib.sha256).hexdigest()
    return f"ip:{mac[:32]}"


def session_token(request: Request) -> str | None:
    """The session token of the session cookie, if a known key signed it within the session lifetime."""
    cookie = request.cookies.get(SESSION_COOKIE)
    if not cookie or len(cookie) > 512:
        return None
    settings: Settings = state_of(request.app).settings
    try:
        token = session_signer(signing_keys(request)).unsign(cookie, max_age=settings.session_days * 86400)
    except BadSignature:  # forged, signed with a retired key, expired, or of the earlier format
        return None
    return token.decode()


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
        "authorization" in request.headers or SESSION_COOKIE in request.cookies or state_of(request.app).secret is None
    )


def resolve_subject(request: Request, sessions: Sessions) -> Subject:
    """The caller: API key, then session cookie, then client address (blocking: a dependency run in a thread)."""
    if any(p in request.query_params for p in KEY_PARAMS):
        raise BadInput("send API keys in the Authorization header (`Bearer <key>`), never in the URL")
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
    if from_this_machine(request, host):
        return Subject(id=LOCAL, tier=LOCAL)
    return Subject(id=anonymous_id(secret(request), host), tier="anonymous")


# Headers a proxy adds: a request that carries one was sent on behalf of another machine.
FORWARDING = ("forwarded", "x-forwarded-for", "x-real-ip")


def from_this_machine(request: Request, host: str) -> bool:
    """Whether a local-mode server should treat the caller as its owner: the TCP peer is this
    machine and nothing says the request was forwarded for someone else."""
    settings: Settings = state_of(request.app).settings
    return settings.local and is_loopback(host) and not any(h in request.headers for h in FORWARDING)


def csrf_seed(request: Request) -> str | None:
    """What a form's CSRF token is bound to: the browser's CSRF cookie."""
    return request.cookies.get(CSRF_COOKIE) or getattr(request.state, "csrf_seed", None)


def csrf_token(request: Request) -> str:
    """The token forms carry in their `csrf` field."""
    seed = csrf_seed(request)
    if not seed:
        return ""
    return csrf_signer(signing_keys(request)).get_signature(seed).decode()


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
    seed = csrf_seed(request)
    if not sent or not seed or len(sent) > 200 or not csrf_signer(signing_keys(request)).verify_signature(seed, sent):
        raise Forbidden("the form has expired or did not come from this site; reload the page and submit it again")
