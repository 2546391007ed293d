"""The trust tiers and what each allows per UTC day, read from Settings; pure (no I/O).

Also the arithmetic of a UTC day and the rate-limit headers a counted response carries:
`RateLimit-Policy` and `RateLimit` (IETF httpapi draft) and GitHub-style `X-RateLimit-*`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from app.config import Settings

TIERS = ("anonymous", "free", "verified", "pro")
POLICY = "daily"
WINDOW = 86400


@dataclass(frozen=True, slots=True)
class Tier:
    name: str
    daily: int  # diagnoses per UTC day
    max_log_bytes: int  # largest log, never more than the server's max_upload_bytes
    how: str  # how a person gets onto this tier


_HOW = {
    "anonymous": "use Tracelore without an account",
    "free": "an account whose e-mail address is not verified yet (made with an API key by an admin)",
    "verified": "sign in at /account with the link Tracelore e-mails you",
    "pro": "ask the operator of this server for the pro tier",
}
# Where a person can go from each tier by themselves: signing in with the e-mailed link verifies the address.
_UPGRADE = {"anonymous": "verified", "free": "verified", "verified": "pro"}


# The tier of a request from the machine a local-mode server runs on (`Settings.local`): never
# given to an account, so it is not in TIERS. Counted like any other (the numbers stay true),
# against an allowance nobody reaches.
LOCAL = "local"
LOCAL_DAILY = 2**31 - 1


def tier_table(settings: Settings) -> dict[str, Tier]:
    """Every tier by name, in ascending order of trust (and `local` last in local mode)."""
    cap = settings.max_upload_bytes
    table = {
        name: Tier(
            name=name,
            daily=getattr(settings, f"quota_{name}"),
            max_log_bytes=min(cap, getattr(settings, f"max_log_{name}")),
            how=_HOW[name],
        )
        for name in TIERS
    }
    if settings.local:
        table[LOCAL] = Tier(LOCAL, LOCAL_DAILY, cap, "run Tracelore on your own machine in local mode (`make serve`)")
    return table


def next_tier(table: dict[str, Tier], name: str) -> Tier | None:
    """The tier to tell a person about when their allowance is spent: the next one they can reach that gives more."""
    current = table.get(name)
    if current is None:
        return None
    target = table.get(_UPGRADE.get(name, ""))
    if target is not None and target.daily > current.daily:
        return target
    names = list(table)
    return next((table[n] for n in names[names.index(name) + 1 :] if table[n].daily > current.daily), None)


def utc_day(now: datetime) -> date:
    """The UTC calendar day of a moment."""
    return now.astimezone(UTC).date()


def next_reset(now: datetime) -> datetime:
    """The next UTC midnight, when every allowance starts again."""
    return datetime.combine(utc_day(now) + timedelta(days=1), time(0), tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Usage:
    """Where a subject stands today."""

    tier: Tier
    used: int
    now: datetime

    @property
    def limit(self) -> int:
        return self.tier.daily

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)

    @property
    def reset(self) -> datetime:
        return next_reset(self.now)

    @property
    def seconds_to_reset(self) -> int:
        return max(1, int((self.reset - self.now).total_seconds() + 0.999))

    def headers(self) -> dict[str, str]:
        """The rate-limit headers of a counted response."""
        return {
            "RateLimit-Policy": f'"{POLICY}";q={self.limit};w={WINDOW}',
            "RateLimit": f'"{POLICY}";r={self.remaining};t={self.seconds_to_reset}',
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Used": str(min(self.used, self.limit)),
            "X-RateLimit-Reset": str(int(self.reset.timestamp())),
            "X-RateLimit-Resource": "diagnoses",
        }

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (GET /api/v1/quota and problem documents)."""
        return {
            "tier": self.tier.name,
            "limit": self.limit,
            "used": min(self.used, self.limit),
            "remaining": self.remaining,
            "reset": self.reset.isoformat().replace("+00:00", "Z"),
            "reset_in_seconds": self.seconds_to_reset,
            "max_log_bytes": self.tier.max_log_bytes,
        }


def spent_message(usage: Usage, upgrade: Tier | None) -> str:
    """What a 429 says: what was used, when it resets, and what the next tier gives."""
    hours, rest = divmod(usage.seconds_to_reset, 3600)
    wait = f"{hours} h {rest // 60} min" if hours else f"{max(1, rest // 60)} min"
    text = (
        f"you have used {'the 1 diagnosis' if usage.limit == 1 else f'all {usage.limit} diagnoses'} "
        f"the {usage.tier.name} tier allows per UTC day; "
        f"the allowance starts again at midnight UTC ({usage.reset.strftime('%Y-%m-%d %H:%M')} UTC, in {wait})"
    )
    if upgrade:
        text += f". The {upgrade.name} tier allows {upgrade.daily} a day: {upgrade.how}"
    return text
