"""The database and its accounts: `tracelore db`, `tracelore purge` and `tracelore admin`.

The database comes from TRACELORE_DATABASE_URL; each command opens it for itself.
"""

from __future__ import annotations

import click

from app.cli.context import current, safe_url
from app.cli.errors import CommandError


@click.group()
def db() -> None:
    """Database migrations (the URL comes from TRACELORE_DATABASE_URL)."""


@db.command("upgrade")
@click.argument("revision", default="head")
def db_upgrade(revision: str) -> None:
    """Migrate the database up to REVISION (default: head)."""
    from app.store.migrate import current as at_revision
    from app.store.migrate import upgrade

    url = current().settings.effective_database_url
    upgrade(url, revision)
    click.echo(f"{safe_url(url)} is at revision {at_revision(url)}")


@db.command("downgrade")
@click.argument("revision")
def db_downgrade(revision: str) -> None:
    """Migrate the database down to REVISION ("base" removes every table)."""
    from app.store.migrate import current as at_revision
    from app.store.migrate import downgrade

    url = current().settings.effective_database_url
    downgrade(url, revision)
    click.echo(f"{safe_url(url)} is at revision {at_revision(url) or 'base'}")


@db.command("current")
def db_current() -> None:
    """Print the revision the database is at."""
    from app.store.migrate import current as at_revision

    url = current().settings.effective_database_url
    click.echo(at_revision(url) or "base (not migrated)")


@click.command("purge")
@click.option(
    "--days",
    type=click.IntRange(min=1),
    default=None,
    help="Delete diagnoses older than this many days [TRACELORE_RETENTION_DAYS, default 30].",
)
def purge(days: int | None) -> None:
    """Delete stored diagnoses older than the retention time, old quota counters and spent sign-in
    links, now (the service also does it hourly)."""
    from app.jobs.retention import COUNTER_DAYS, purge_once
    from app.store.db import make_engine, make_sessionmaker

    settings = current().settings
    if days is not None:
        settings = settings.model_copy(update={"retention_days": days})
    engine = make_engine(settings.effective_database_url)
    try:
        purged = purge_once(make_sessionmaker(engine), settings)
    finally:
        engine.dispose()
    if settings.retention_days:
        click.echo(f"purged {purged.diagnoses} diagnoses older than {settings.retention_days} days")
    else:
        click.echo("retention is 0 days (keep forever): no diagnosis purged")
    click.echo(
        f"purged {purged.counters} quota counters older than {COUNTER_DAYS} days"
        f" and {purged.login_tokens} spent sign-in links"
    )


@click.group()
def admin() -> None:
    """Accounts, tiers, API keys and usage (the database comes from TRACELORE_DATABASE_URL)."""


@admin.command("set-tier")
@click.argument("email")
@click.argument("tier", type=click.Choice(["free", "verified", "pro"]))
def admin_set_tier(email: str, tier: str) -> None:
    """Put the account of EMAIL on TIER (the account is created if there is none)."""
    from app.store import accounts

    with current().store() as session:
        accounts.ensure_account(session, email, now=accounts.utcnow(), tier=tier)
        account = accounts.set_tier(session, email, tier)
    assert account is not None
    click.echo(f"{account.email} is on the {account.tier} tier")


@admin.command("set-admin")
@click.argument("email")
@click.option("--revoke", is_flag=True, help="Withdraw the flag instead.")
def admin_set_admin(email: str, revoke: bool) -> None:
    """Let the account of EMAIL see the admin pages (/admin/unknowns); it must exist (signed in once)."""
    from app.store import accounts

    with current().store() as session:
        account = accounts.set_admin(session, email, not revoke)
    if account is None:
        raise CommandError(f"no account for {email}: it is created when that address first signs in")
    click.echo(f"{account.email} is {'an admin' if account.is_admin else 'no longer an admin'}")


@admin.command("create-key")
@click.argument("email")
@click.option("--name", default="CI", show_default=True, help="What the key is for.")
def admin_create_key(email: str, name: str) -> None:
    """Create an API key for EMAIL (creating the account if needed); the key is printed once, on stdout."""
    from app.store import accounts

    with current().store() as session:
        account = accounts.ensure_account(session, email, now=accounts.utcnow())
        key, secret = accounts.create_api_key(session, account.id, name=name, now=accounts.utcnow())
    click.echo(
        f"key {key.id} ({key.prefix}...) for {account.email} on the {account.tier} tier; it is not shown again:",
        err=True,
    )
    click.echo(secret)


@admin.command("revoke-key")
@click.argument("key")
def admin_revoke_key(key: str) -> None:
    """Revoke an API key, given by its id, its visible prefix or the key itself."""
    from app.store import accounts

    with current().store() as session:
        revoked = accounts.revoke_api_key(session, key.strip(), now=accounts.utcnow())
    if revoked is None:
        raise CommandError(f"no single API key matches {key[:16]!r}; give its id or its full prefix")
    click.echo(f"key {revoked.id} ({revoked.prefix}...) is revoked")


@admin.command("usage")
@click.option(
    "--days",
    type=click.IntRange(1, 3660),
    default=7,
    show_default=True,
    help="How many UTC days back (the hourly purge keeps counters 7 days).",
)
def admin_usage(days: int) -> None:
    """Diagnoses counted per UTC day and tier, and accounts per tier."""
    from datetime import timedelta

    from app.quota.counters import usage_by_day
    from app.quota.tiers import utc_day
    from app.store import accounts

    since = utc_day(accounts.utcnow()) - timedelta(days=days - 1)
    with current().store() as session:
        rows = usage_by_day(session, since=since)
        everyone = accounts.list_accounts(session)
    click.echo(f"{'day':<12}{'tier':<12}{'subjects':>10}{'diagnoses':>11}")
    for row in rows:
        click.echo(f"{row.day.isoformat():<12}{row.tier:<12}{row.subjects:>10}{row.used:>11}")
    if not rows:
        click.echo(f"(nothing counted since {since.isoformat()})")
    tiers: dict[str, int] = {}
    for account in everyone:
        tiers[account.tier] = tiers.get(account.tier, 0) + 1
    click.echo("accounts: " + (", ".join(f"{n} {t}" for t, n in sorted(tiers.items())) or "none"))
