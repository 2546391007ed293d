"""Sign-in by e-mail link, the session cookie, sign-out, and the account page where API keys are made and revoked.

Every form carries a CSRF token bound to the browser's CSRF cookie and is refused when a
browser says it was posted from another site. A sign-in link opens a page with a button
rather than signing in on GET, so mail scanners that fetch links cannot spend it.
"""

from __future__ import annotations

import logging
import re
import secrets
import smtplib
import ssl
from datetime import datetime, timedelta
from email.message import EmailMessage
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse, Response
from sqlalchemy.orm import Session
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.config import Settings
from app.errors import BadInput, MailLimit, NotReady, SignInFirst
from app.jobs.retention import not_before
from app.quota import counters
from app.quota.tiers import utc_day
from app.store import accounts as store
from app.store.accounts import Account
from app.store.diagnoses import list_made_by
from app.web.allowance import tiers, usage_now
from app.web.deps import Sessions, SessionsDep, SettingsDep
from app.web.identity import (
    CSRF_COOKIE,
    SESSION_COOKIE,
    anonymous_id,
    check_csrf,
    clock,
    secret,
    session_cookie,
    session_token,
    signing_keys,
)
from app.web.state import state_of

log = logging.getLogger("tracelore")

router = APIRouter()

EMAIL = re.compile(r"^[^@\s<>\"',;]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}\.)+[A-Za-z]{2,63}$")
LINKS_PER_HOUR = 5  # sign-in e-mails to one address per hour
FORM_LIMITS = {"max_files": 0, "max_fields": 8, "max_part_size": 4096}


class CsrfCookieMiddleware:
    """Give every browser a random CSRF cookie on its first page, to which form tokens are bound."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith("/api/") or scope["path"].startswith("/static/"):
            await self.app(scope, receive, send)
            return
        cookies = dict(scope.get("headers", []))
        raw = cookies.get(b"cookie", b"").decode("latin-1")
        if f"{CSRF_COOKIE}=" in raw:
            await self.app(scope, receive, send)
            return
        seed = secrets.token_urlsafe(24)
        scope.setdefault("state", {})["csrf_seed"] = seed
        secure = "; Secure" if scope.get("scheme") == "https" else ""
        cookie = f"{CSRF_COOKIE}={seed}; Path=/; HttpOnly; SameSite=Lax{secure}"

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])  # optional in ASGI
                headers = MutableHeaders(scope=message)
                # A page a shared cache may keep (encyclopedia entries) must not carry a
                # per-browser cookie: the cache would hand it to every later visitor.
                if "public" not in " ".join(headers.getlist("cache-control")).lower():
                    headers.append("set-cookie", cookie)
            await send(message)

        await self.app(scope, receive, send_with_cookie)


def _page(request: Request, template: str, context: dict[str, Any], *, status: int = 200) -> Response:
    response: Response = state_of(request.app).templates.TemplateResponse(
        request, template, context, status_code=status
    )
    response.headers["Cache-Control"] = "no-store"
    return response


def _signed_in(request: Request, sessions: Sessions) -> tuple[str, Account] | None:
    token = session_token(request)
    if not token:
        return None
    with sessions.begin() as session:
        account = store.session_account(session, token, now=clock(request))
    return (token, account) if account else None


def _link(request: Request, settings: Settings, token: str) -> str:
    path = request.url_for("sign_in_link", token=token)
    if settings.base_url:
        return settings.base_url.rstrip("/") + path.path
    return str(path)


def send_sign_in_mail(settings: Settings, *, to: str, link: str, minutes: int) -> None:
    """E-mail a sign-in link through the configured SMTP server, or write it to the log when there is none."""
    if not settings.smtp_host:
        log.warning("no SMTP server is configured (TRACELORE_SMTP_HOST); sign-in link for %s: %s", to, link)
        return
    message = EmailMessage()
    message["Subject"] = "Your Tracelore sign-in link"
    message["From"] = settings.mail_from
    message["To"] = to
    message.set_content(
        f"Open this link to sign in to Tracelore:\n\n{link}\n\n"
        f"It works once, for {minutes} minutes. If you did not ask for it, ignore this e-mail.\n"
    )
    context = ssl.create_default_context()
    smtp: smtplib.SMTP
    if settings.smtp_tls == "tls":
        smtp = smtplib.SMTP_SSL(settings.smtp_host, settings.smtp_port, timeout=15, context=context)
    else:
        smtp = smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=15)
    with smtp:
        if settings.smtp_tls == "starttls":
            smtp.starttls(context=context)
        if settings.smtp_username:
            smtp.login(settings.smtp_username, settings.smtp_password)
        smtp.send_message(message)


@router.get("/account", name="account")
def account_page(request: Request, settings: SettingsDep, sessions: SessionsDep) -> Response:
    """The sign-in form, or the account: tier, today's allowance and API keys."""
    found = _signed_in(request, sessions)
    if found is None:
        return _page(request, "signin.html", {"tiers": tiers(request), "minutes": settings.login_link_minutes})
    return _account(request, sessions, found[1])


def _account(
    request: Request, sessions: Sessions, account: Account, *, new_key: str | None = None, status: int = 200
) -> Response:
    from app.web.identity import Subject

    subject = Subject(id=f"account:{account.id}", tier=account.tier, account=account)
    usage = usage_now(request, sessions, subject)
    with sessions.begin() as session:
        keys = store.list_api_keys(session, account.id)
        made = list_made_by(session, subject.id, not_before=not_before(state_of(request.app).settings))
    context = {
        "account": account,
        "usage": usage,
        "keys": keys,
        "new_key": new_key,
        "tiers": tiers(request),
        "made": made,
    }
    return _page(request, "account.html", context, status=status)


MAIL_COUNTER = "sign-in-mail"  # the counters' "tier": kept apart from diagnoses in usage reports


def _to_next_hour(now: datetime) -> int:
    return 3600 - (now.minute * 60 + now.second)


def limit_sign_in_mail(session: Session, settings: Settings, *, client: str, now: datetime) -> None:
    """Count one sign-in e-mail for the client and for the service this UTC hour; raise when either is spent.

    Atomic counters (the daily allowance's), one per hour: a burst from many connections cannot
    send one e-mail more than the limits.
    """
    hour, day = f"{now.hour:02d}", utc_day(now)
    wait = _to_next_hour(now)
    mine = counters.consume(
        session, subject=f"mail:{client}:{hour}", tier=MAIL_COUNTER, day=day, limit=settings.sign_in_mail_per_client
    )
    if mine is None:
        raise MailLimit(
            f"{settings.sign_in_mail_per_client} sign-in links were already asked for from this address of yours "
            f"this hour; try again in {wait // 60 + 1} minutes.",
            retry_after=wait,
        )
    everyone = counters.consume(
        session, subject=f"mail:all:{hour}", tier=MAIL_COUNTER, day=day, limit=settings.sign_in_mail_per_hour
    )
    if everyone is None:
        log.warning(
            "sign-in e-mail refused: the service-wide limit of %d an hour is reached", settings.sign_in_mail_per_hour
        )
        raise MailLimit(
            f"Tracelore has sent too many sign-in e-mails this hour; try again in {wait // 60 + 1} minutes.",
            status=503,
            retry_after=wait,
        )


@router.post("/account/sign-in", name="sign_in")
async def sign_in(request: Request, settings: SettingsDep, sessions: SessionsDep) -> Response:
    """Send a one-time sign-in link to an e-mail address."""
    form = await request.form(**FORM_LIMITS)
    check_csrf(request, form)
    email = str(form.get("email") or "").strip()
    if len(email) > 254 or not EMAIL.match(email):
        error = "That does not look like an e-mail address (name@example.org)."
        return _sign_in_again(request, settings, email[:254], error, status=422)
    now = clock(request)
    client = anonymous_id(secret(request), request.client.host if request.client else "unknown")
    try:
        token = await run_in_threadpool(_issue_link, sessions, settings, email, client=client, now=now)
    except MailLimit as refused:
        response = _sign_in_again(request, settings, email, refused.detail, status=refused.status)
        response.headers["Retry-After"] = str(refused.retry_after or _to_next_hour(now))
        return response
    await _send_link(settings, email, _link(request, settings, token))
    return _page(request, "signin_sent.html", {"email": email, "minutes": settings.login_link_minutes})


def _sign_in_again(request: Request, settings: Settings, email: str, error: str, *, status: int) -> Response:
    """The sign-in form again, with the address kept and why it was refused."""
    context = {"tiers": tiers(request), "minutes": settings.login_link_minutes, "email": email, "error": error}
    return _page(request, "signin.html", context, status=status)


def _issue_link(sessions: Sessions, settings: Settings, email: str, *, client: str, now: datetime) -> str:
    """A new sign-in token for `email`, within the per-client and per-address limits."""
    with sessions.begin() as session:
        # Counted first (each an atomic write), so on SQLite the transaction holds the write
        # lock before it reads; a refusal rolls every count back: nothing is sent, nothing counted.
        limit_sign_in_mail(session, settings, client=client, now=now)
        if store.recent_login_tokens(session, email, since=now - store.LINK_COUNT_WINDOW) >= LINKS_PER_HOUR:
            raise MailLimit(f"{LINKS_PER_HOUR} sign-in links were already sent to this address in the last hour.")
        lifetime = timedelta(minutes=settings.login_link_minutes)
        return store.create_login_token(session, email, now=now, lifetime=lifetime)


async def _send_link(settings: Settings, email: str, link: str) -> None:
    """Mail the link; a mail server that cannot take it is the service not being ready, said as such."""
    try:
        await run_in_threadpool(send_sign_in_mail, settings, to=email, link=link, minutes=settings.login_link_minutes)
    except (OSError, smtplib.SMTPException) as exc:
        log.error("could not send a sign-in e-mail through %s: %s", settings.smtp_host, exc)
        raise NotReady(
            "the sign-in e-mail could not be sent; try again in a few minutes", headers={"Retry-After": "60"}
        ) from None


@router.get("/account/sign-in/{token}", name="sign_in_link")
def sign_in_link(request: Request, token: str) -> Response:
    """The page a sign-in link opens: one button that signs in (a GET never spends the link).

    The button posts the token in the form body to /account/session, so the request that
    spends it names no token in its address (access logs, history).
    """
    return _page(request, "signin_confirm.html", {"token": token[:200]})


@router.post("/account/session", name="sign_in_confirm")
async def sign_in_confirm(request: Request, settings: SettingsDep, sessions: SessionsDep) -> Response:
    """Spend the link: verify the address, create the account if needed, start a session."""
    form = await request.form(**FORM_LIMITS)
    check_csrf(request, form)
    token = str(form.get("token") or "")[:200]
    session_token_ = await run_in_threadpool(_spend_link, sessions, settings, token, now=clock(request))
    if session_token_ is None:
        error = "That sign-in link has expired or was already used. Ask for a new one."
        return _sign_in_again(request, settings, "", error, status=400)
    response = RedirectResponse(request.url_for("account").path, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        session_cookie(signing_keys(request), session_token_),
        max_age=settings.session_days * 86400,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https" or settings.base_url.startswith("https://"),
    )
    return response


def _spend_link(sessions: Sessions, settings: Settings, token: str, *, now: datetime) -> str | None:
    """A new session's token for the link's account (made on first use), or None for a spent or expired link."""
    with sessions.begin() as session:
        account = store.use_login_token(session, token, now=now)
        if account is None:
            return None
        return store.create_session(session, account.id, now=now, lifetime=timedelta(days=settings.session_days))


@router.post("/account/sign-out", name="sign_out")
async def sign_out(request: Request, sessions: SessionsDep) -> Response:
    """End this browser's session."""
    form = await request.form(**FORM_LIMITS)
    check_csrf(request, form)
    token = session_token(request)
    if token:

        def end() -> None:
            with sessions.begin() as session:
                store.end_session(session, token)

        await run_in_threadpool(end)
    response = RedirectResponse(request.url_for("home").path, status_code=303)
    response.delete_cookie(SESSION_COOKIE)
    return response


async def _require_account(request: Request, sessions: Sessions) -> Account:
    found = await run_in_threadpool(_signed_in, request, sessions)
    if found is None:
        raise SignInFirst()
    return found[1]


@router.post("/account/keys", name="create_key")
async def create_key(request: Request, sessions: SessionsDep) -> Response:
    """Create an API key; the page shows it this once."""
    form = await request.form(**FORM_LIMITS)
    check_csrf(request, form)
    account = await _require_account(request, sessions)
    name = str(form.get("name") or "").strip()
    if len(name) > 100:
        raise BadInput("a key name is at most 100 characters")

    def create() -> str:
        with sessions.begin() as session:
            return store.create_api_key(session, account.id, name=name or "CI", now=clock(request))[1]

    key = await run_in_threadpool(create)
    return await run_in_threadpool(lambda: _account(request, sessions, account, new_key=key, status=201))


@router.post("/account/keys/{key_id}/revoke", name="revoke_key")
async def revoke_key(request: Request, key_id: str, sessions: SessionsDep) -> Response:
    """Revoke one of the account's keys."""
    form = await request.form(**FORM_LIMITS)
    check_csrf(request, form)
    account = await _require_account(request, sessions)

    def revoke() -> bool:
        with sessions.begin() as session:
            return store.revoke_api_key(session, key_id[:64], now=clock(request), account_id=account.id) is not None

    if not await run_in_threadpool(revoke):
        raise BadInput(f"no key {key_id[:64]!r} on this account")
    return RedirectResponse(request.url_for("account").path, status_code=303)
