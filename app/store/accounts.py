"""Accounts, one-time sign-in links, sessions and API keys. Functions take a Session first and never commit.

Secrets (link tokens, session tokens, API keys) are random and high-entropy, so they are
stored as a plain SHA-256: the database alone never lets anyone sign in or call the API.
"""

from __future__ import annotations

import hashlib
import secrets
import string
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, overload

from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.store.tables import AccountRow, ApiKeyRow, LoginTokenRow, ServerSecretRow, SessionRow

KEY_PREFIX = "tlk_"  # recognisable in logs and by secret scanners
PREFIX_SHOWN = 12  # characters of a key kept in clear to tell keys apart: "tlk_" and 8 random ones
_BASE62 = string.digits + string.ascii_letters
LAST_USED_EVERY = timedelta(minutes=1)  # last-used time is written at most this often per key


def dialect_insert(session: Session, table: Any) -> Any:
    """An INSERT of the session's dialect, which knows ON CONFLICT (PostgreSQL and SQLite alike)."""
    name = session.get_bind().dialect.name
    return (postgresql.insert if name == "postgresql" else sqlite.insert)(table)


def insert_ignoring(session: Session, table: Any) -> Any:
    """INSERT ... ON CONFLICT DO NOTHING."""
    return dialect_insert(session, table).on_conflict_do_nothing()


@overload
def _aware(value: datetime) -> datetime: ...
@overload
def _aware(value: datetime | None) -> datetime | None: ...
def _aware(value: datetime | None) -> datetime | None:
    # SQLite hands back naive datetimes; everything stored is UTC.
    return value if value is None or value.tzinfo else value.replace(tzinfo=UTC)


def digest(secret: str) -> str:
    """The stored form of a token or key."""
    return hashlib.sha256(secret.encode()).hexdigest()


# Providers that deliver name+tag@ to name@, and of those the ones that also ignore dots in the
# name: their spellings of one mailbox are one account (one verified tier, one allowance).
PLUS_TAGS = frozenset(
    {
        "gmail.com",
        "googlemail.com",
        "outlook.com",
        "hotmail.com",
        "live.com",
        "msn.com",
        "icloud.com",
        "me.com",
        "mac.com",
        "fastmail.com",
        "fastmail.fm",
        "proton.me",
        "protonmail.com",
        "pm.me",
    }
)
NO_DOTS = frozenset({"gmail.com", "googlemail.com"})
SAME_DOMAIN = {"googlemail.com": "gmail.com"}


def canonical_email(email: str) -> str:
    """One spelling per mailbox: lower case, and for providers known to ignore them, no plus tag and no dots.

    Other domains keep their tags and dots: a mail server may deliver them to different people.
    """
    email = email.strip().lower()
    name, at, domain = email.rpartition("@")
    if not at or not name:
        return email
    if domain in PLUS_TAGS:
        name = name.split("+", 1)[0] or name
    if domain in NO_DOTS:
        name = name.replace(".", "") or name
    return f"{name}@{SAME_DOMAIN.get(domain, domain)}"


def normalise_email(email: str) -> str:
    """The form an address is stored and compared in (its canonical spelling)."""
    return canonical_email(email)


@dataclass(frozen=True, slots=True)
class Account:
    id: str
    email: str
    tier: str
    created_at: datetime
    verified_at: datetime | None
    is_admin: bool = False


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: str
    account_id: str
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


def _account(row: AccountRow) -> Account:
    return Account(row.id, row.email, row.tier, _aware(row.created_at), _aware(row.verified_at), bool(row.is_admin))


def _key(row: ApiKeyRow) -> ApiKey:
    return ApiKey(
        id=row.id,
        account_id=row.account_id,
        name=row.name,
        prefix=row.prefix,
        created_at=_aware(row.created_at),
        last_used_at=_aware(row.last_used_at),
        revoked_at=_aware(row.revoked_at),
    )


# Accounts


def get_account(session: Session, account_id: str) -> Account | None:
    """The account with this id."""
    row = session.get(AccountRow, account_id)
    return _account(row) if row else None


def find_account(session: Session, email: str) -> Account | None:
    """The account with this e-mail address (in any spelling of its mailbox)."""
    canonical = normalise_email(email)
    row = session.scalars(select(AccountRow).where(AccountRow.email == canonical)).first()
    lowered = email.strip().lower()
    if row is None and lowered != canonical:  # an account made before addresses were made canonical
        row = session.scalars(select(AccountRow).where(AccountRow.email == lowered)).first()
    return _account(row) if row else None


def ensure_account(session: Session, email: str, *, now: datetime, tier: str = "free") -> Account:
    """The account for an address, created (unverified, on `tier`) if there is none."""
    found = find_account(session, email)
    if found:
        return found
    email = normalise_email(email)
    # Created at the same moment by another request: the conflict is ignored and its row is read.
    session.execute(
        insert_ignoring(session, AccountRow).values(id=secrets.token_hex(16), email=email, tier=tier, created_at=now)
    )
    account = find_account(session, email)
    assert account is not None
    return account


def _update(session: Session, email: str, **values: object) -> Account | None:
    """Change the account of an address (in any spelling of its mailbox); None if there is none."""
    found = find_account(session, email)
    if found is None:
        return None
    session.execute(update(AccountRow).where(AccountRow.id == found.id).values(**values))
    return get_account(session, found.id)


def set_tier(session: Session, email: str, tier: str) -> Account | None:
    """Put an account on a tier; None if there is no such account."""
    return _update(session, email, tier=tier)


def set_admin(session: Session, email: str, admin: bool) -> Account | None:
    """Grant or withdraw the admin flag (the unknown-failures page); None if there is no such account."""
    return _update(session, email, is_admin=admin)


def list_accounts(session: Session) -> list[Account]:
    """Every account, oldest first."""
    return [_account(r) for r in session.scalars(select(AccountRow).order_by(AccountRow.created_at, AccountRow.id))]


# Sign-in links

LINK_COUNT_WINDOW = timedelta(hours=1)  # links sent to an address are limited per this window


def create_login_token(session: Session, email: str, *, now: datetime, lifetime: timedelta) -> str:
    """A one-time sign-in token for an address (only its hash is stored)."""
    token = secrets.token_urlsafe(32)
    email = normalise_email(email)
    purge_login_tokens(session, now=now, email=email)
    session.add(
        LoginTokenRow(token_hash=digest(token), email=normalise_email(email), created_at=now, expires_at=now + lifetime)
    )
    session.flush()
    return token


def recent_login_tokens(session: Session, email: str, *, since: datetime) -> int:
    """Sign-in links sent to an address since a time (to refuse mail floods)."""
    query = select(func.count()).where(LoginTokenRow.email == normalise_email(email), LoginTokenRow.created_at >= since)
    return int(session.scalar(query) or 0)


def use_login_token(session: Session, token: str, *, now: datetime) -> Account | None:
    """Spend a sign-in token once: the account it signs in to (created and verified as needed), or None."""
    spent = session.execute(
        update(LoginTokenRow)
        .where(
            LoginTokenRow.token_hash == digest(token),
            LoginTokenRow.used_at.is_(None),
            LoginTokenRow.expires_at > now,
        )
        .values(used_at=now)
        .returning(LoginTokenRow.email)
    ).first()
    if spent is None:
        return None
    account = ensure_account(session, spent[0], now=now)
    values: dict[str, object] = {"last_sign_in_at": now}
    if account.verified_at is None:
        values["verified_at"] = now
        if account.tier == "free":  # using the link proves the address: the verified tier follows
            values["tier"] = "verified"
    session.execute(update(AccountRow).where(AccountRow.id == account.id).values(**values))
    return get_account(session, account.id)


def purge_login_tokens(session: Session, *, now: datetime, email: str | None = None) -> int:
    """Delete spent sign-in tokens (expired or used), of one address or all; how many.

    A spent link stays until it can no longer count towards the hourly limit of links per address.
    """
    spent = (LoginTokenRow.expires_at < now) | LoginTokenRow.used_at.is_not(None)
    stale = spent & (LoginTokenRow.created_at < now - LINK_COUNT_WINDOW)
    if email is not None:
        stale = stale & (LoginTokenRow.email == email)
    result = session.execute(delete(LoginTokenRow).where(stale))
    return int(getattr(result, "rowcount", 0) or 0)


# Sessions


def create_session(session: Session, account_id: str, *, now: datetime, lifetime: timedelta) -> str:
    """A new signed-in session; returns the token for the cookie (the account's expired sessions go)."""
    session.execute(delete(SessionRow).where(SessionRow.account_id == account_id, SessionRow.expires_at < now))
    token = secrets.token_urlsafe(32)
    session.add(SessionRow(token_hash=digest(token), account_id=account_id, created_at=now, expires_at=now + lifetime))
    session.flush()
    return token


def session_account(session: Session, token: str, *, now: datetime) -> Account | None:
    """The account a live session token belongs to."""
    row = session.execute(
        select(AccountRow)
        .join(SessionRow, SessionRow.account_id == AccountRow.id)
        .where(SessionRow.token_hash == digest(token), SessionRow.expires_at > now)
    ).scalar_one_or_none()
    return _account(row) if row else None


def end_session(session: Session, token: str) -> None:
    """Sign a session out."""
    session.execute(delete(SessionRow).where(SessionRow.token_hash == digest(token)))


# API keys


def _base62(n: int, width: int) -> str:
    out = []
    for _ in range(width):
        n, r = divmod(n, 62)
        out.append(_BASE62[r])
    return "".join(reversed(out))


def new_key() -> str:
    """A fresh API key: prefix, 30 random base62 characters and a CRC32 check (GitHub's token format)."""
    body = "".join(secrets.choice(_BASE62) for _ in range(30))
    return f"{KEY_PREFIX}{body}{_base62(zlib.crc32(body.encode()), 6)}"


def well_formed_key(key: str) -> bool:
    """Whether a string has the shape and checksum of a Tracelore key (checked before any lookup)."""
    if not key.startswith(KEY_PREFIX) or len(key) != len(KEY_PREFIX) + 36:
        return False
    body, check = key[len(KEY_PREFIX) : -6], key[-6:]
    return all(c in _BASE62 for c in body) and _base62(zlib.crc32(body.encode()), 6) == check


def create_api_key(session: Session, account_id: str, *, name: str, now: datetime) -> tuple[ApiKey, str]:
    """Create a key for an account; returns it and the secret, which is never stored nor shown again."""
    secret = new_key()
    row = ApiKeyRow(
        id=secrets.token_hex(8),
        account_id=account_id,
        name=name.strip()[:100] or "key",
        prefix=secret[:PREFIX_SHOWN],
        key_hash=digest(secret),
        created_at=now,
    )
    session.add(row)
    session.flush()
    return _key(row), secret


def list_api_keys(session: Session, account_id: str) -> list[ApiKey]:
    """An account's keys, newest first, revoked ones included."""
    rows = session.scalars(
        select(ApiKeyRow).where(ApiKeyRow.account_id == account_id).order_by(ApiKeyRow.created_at.desc())
    )
    return [_key(r) for r in rows]


def key_account(session: Session, secret: str, *, now: datetime) -> tuple[ApiKey, Account] | None:
    """The live key and its account for a secret, recording the use; None if unknown or revoked."""
    if not well_formed_key(secret):
        return None
    row = session.execute(
        select(ApiKeyRow, AccountRow)
        .join(AccountRow, AccountRow.id == ApiKeyRow.account_id)
        .where(ApiKeyRow.key_hash == digest(secret), ApiKeyRow.revoked_at.is_(None))
    ).first()
    if row is None:
        return None
    key, account = row
    last = _aware(key.last_used_at)
    if last is None or now - last >= LAST_USED_EVERY:
        session.execute(update(ApiKeyRow).where(ApiKeyRow.id == key.id).values(last_used_at=now))
        key.last_used_at = now
    return _key(key), _account(account)


def revoke_api_key(session: Session, key: str, *, now: datetime, account_id: str | None = None) -> ApiKey | None:
    """Revoke a key given by id, visible prefix or the secret itself (only the owner's, with account_id)."""
    match = (ApiKeyRow.id == key) | (ApiKeyRow.prefix == key) | (ApiKeyRow.key_hash == digest(key))
    query = select(ApiKeyRow).where(match)
    if account_id is not None:
        query = query.where(ApiKeyRow.account_id == account_id)
    rows = list(session.scalars(query.limit(2)))
    if len(rows) != 1:
        return None
    row = rows[0]
    if row.revoked_at is None:
        row.revoked_at = now
        session.flush()
    return _key(row)


# The server secret


def server_secret(session: Session, *, now: datetime) -> str:
    """The generated secret every process shares (created on first use)."""
    found = session.get(ServerSecretRow, "default")
    if found:
        return found.value
    session.execute(
        insert_ignoring(session, ServerSecretRow).values(name="default", value=secrets.token_hex(32), created_at=now)
    )
    row = session.get(ServerSecretRow, "default", populate_existing=True)
    assert row is not None
    return row.value


def utcnow() -> datetime:
    """Now, in UTC."""
    return datetime.now(UTC)
