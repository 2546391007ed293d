"""The `tracelore` command. Commands stay thin: parse, call the core or the store, print.

Exit codes of `diagnose` follow grep: 0 nothing found, 1 failure identified,
2 usage or input error.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import os
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import click

from app import __version__
from app.cli_input import open_log, terminal
from app.cli_options import SIGNATURES
from app.config import Settings, thread_policy
from app.core.library import TAXONOMY_FILE, Library, load_library
from app.core.models import LIKELY, Diagnosis
from app.errors import LibraryError, NotText, TraceloreError

# Each command imports what only it needs (formats, lint, the HTTP client, the store, the
# web stack) when it runs: every command pays for the imports at its start.
if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from app.core.stored import StoredDiagnosis

FORMATS = ("text", "json", "markdown", "sarif", "junit", "github")


def scan_threads() -> int:
    """Threads that scan one large log when it is the one diagnosis running (`app.config.thread_policy`)."""
    return thread_policy(Settings(), diagnoses=1).scan


def _library(signatures: Path | None) -> Library:
    settings = Settings()
    try:
        return load_library(signatures or settings.signatures_dir, cache=settings.cache_dir)
    except LibraryError as exc:
        raise click.ClickException(f"the signature library is broken:\n{exc.detail}") from exc


@contextlib.contextmanager
def _open_logs(paths: tuple[str, ...]) -> Iterator[list[tuple[str | None, BinaryIO]]]:
    """The logs, each gunzipped when it is gzip (standard input too) and refused when it is not text."""
    progress = terminal()
    with contextlib.ExitStack() as stack:
        opened: list[tuple[str | None, BinaryIO]] = []
        for p in paths:
            if p == "-":
                name, stream = "<stdin>", sys.stdin.buffer
            else:
                path = Path(p)
                if path.is_dir():
                    raise click.UsageError(f"{p} is a directory; pass log files")
                try:
                    stream = stack.enter_context(gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb"))
                except OSError as exc:
                    raise click.UsageError(f"cannot read {p}: {exc.strerror or exc}") from exc
                name = p
            try:
                opened.append((name, open_log(name, stream, progress=progress)))
            except NotText as exc:
                raise click.UsageError(f"{name}: {exc.detail}") from None
        try:
            yield opened
        finally:
            if progress is not None:
                progress.write("\r\x1b[K")  # no progress line left under the report


def local_service_url() -> str:
    """The address `tracelore serve` answers on with the current settings."""
    settings = Settings()
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    return f"http://{host}:{settings.port}"


def _written(paths: tuple[str, ...]) -> datetime | None:
    """When the log files were last written (local time, as logs print it): the year of times without one."""
    times = []
    for p in paths:
        if p != "-":
            with contextlib.suppress(OSError):
                times.append(Path(p).stat().st_mtime)
    return datetime.fromtimestamp(max(times)) if times else None


def _failed(d: Diagnosis, fail_on: str) -> bool:
    if fail_on == "never":
        return False
    threshold = LIKELY if fail_on == "likely" else 0.0
    return any(c.episode == "terminal" and c.confidence >= threshold for c in d.candidates)


class _Commands(click.Group):
    """A group whose authoring commands are imported only when one is asked for (or listed)."""

    LAZY = {
        "explain": ("app.cli_authoring", "explain_command"),
        "example": ("app.cli_authoring", "example"),
        "corpus": ("app.cli_corpus", "corpus"),
        "eval": ("app.cli_corpus", "eval_command"),
        "unknowns": ("app.cli_unknowns", "unknowns"),
        "watch": ("app.cli_watch", "watch_command"),
        "lsp": ("app.cli_watch", "lsp_command"),
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.LAZY and cmd_name not in self.commands:
            import importlib

            module, name = self.LAZY[cmd_name]
            self.add_command(getattr(importlib.import_module(module), name), cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracelore")
def main() -> None:
    """Tracelore: diagnose failed ML training runs from their logs."""


def render(d: Diagnosis, fmt: str, *, base_url: str = "", permalink: str | None = None) -> str:
    """The report of a diagnosis in one of FORMATS (each format's module imported only for it)."""
    if fmt == "json":
        return d.model_dump_json(indent=2) + "\n"
    if fmt in ("sarif", "junit", "github"):
        from app.core.formats import render_github, render_junit, render_sarif

        if fmt == "sarif":
            report = render_sarif(d, tool_version=__version__, base_url=base_url, permalink=permalink)
            return json.dumps(report, indent=2) + "\n"
        if fmt == "junit":
            return render_junit(d, base_url=base_url, permalink=permalink)
        return render_github(d, base_url=base_url, permalink=permalink)
    from app.core.render import render_markdown, render_text

    if fmt == "markdown":
        return render_markdown(d, permalink=permalink, base_url=base_url)
    text = render_text(d, base_url=base_url)
    return text + (f"Full diagnosis: {permalink}\n" if permalink else "")


def _report_option(values: tuple[str, ...]) -> list[tuple[str, Path]]:
    reports = []
    for value in values:
        fmt, sep, path = value.partition("=")
        if not sep or fmt not in FORMATS or not path:
            raise click.BadParameter(f"expected FORMAT=PATH with FORMAT one of {', '.join(FORMATS)}, got {value!r}")
        reports.append((fmt, Path(path)))
    return reports


def _remote(
    logs: tuple[str, ...],
    signatures: Path | None,
    *,
    server: str,
    api_key: str | None,
    full: bool,
    top: int | None,
    max_wait: float,
) -> StoredDiagnosis:
    from app.remote import fetch_spec, human_size, padded_log, post_excerpt, post_log

    if len(logs) != 1:
        raise click.UsageError(
            "remote mode sends one log per request: pass one file (diagnose several files locally, without --server)"
        )
    options: dict[str, Any] = {
        "api_key": api_key,
        "top": top,
        "max_wait": max_wait,
        "notify": lambda message: click.echo(message, err=True),
    }
    # The browser's selection rules, as the server publishes them for its own library.
    spec = None if full else fetch_spec(server, api_key=api_key)
    with _open_logs(logs) as opened:
        name, stream = opened[0]
        filename = Path(name or "log").name
        if full:
            payload = stream.read()
            click.echo(f"Sending {name}: the whole log, {human_size(len(payload))}", err=True)
            return post_log(server, payload, filename=filename, **options)
        from app.core.evidence import prefilter_spec, select_evidence

        older = spec is None  # a server from before excerpts: same rules from the local library, sent as text
        excerpt = select_evidence(
            iter(lambda: stream.read(4 << 20), b""),
            spec or prefilter_spec(_library(signatures)),
            threads=scan_threads(),
        )
    kept = sum(len(text.encode("utf-8", errors="replace")) + 1 for _, text in excerpt.lines)
    click.echo(
        f"Sending the evidence of {name}: kept {len(excerpt.lines):,} of {excerpt.total_lines:,} lines, "
        f"{human_size(kept)} of {human_size(excerpt.total_bytes)} (--full sends the whole log)",
        err=True,
    )
    if older:
        return post_log(server, padded_log(excerpt.lines), filename=filename, **options)
    return post_excerpt(
        server,
        excerpt.lines,
        total_lines=excerpt.total_lines,
        total_bytes=excerpt.total_bytes,
        filename=filename,
        **options,
    )


@main.command()
@click.argument("logs", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("--top", type=click.IntRange(min=1), default=None, help="Show at most N candidates.")
@click.option(
    "--fail-on",
    type=click.Choice(["never", "likely", "any"]),
    default="any",
    show_default=True,
    help="Which findings make the exit code 1: none, likely ones, or any in the final episode.",
)
@click.option(
    "--report",
    "reports",
    multiple=True,
    metavar="FORMAT=PATH",
    help="Also write a report in FORMAT to PATH (repeatable), e.g. --report sarif=tracelore.sarif.",
)
@SIGNATURES
@click.option(
    "--server", envvar="TRACELORE_SERVER", default=None, help="Diagnose on this Tracelore server [TRACELORE_SERVER]."
)
@click.option("--api-key", envvar="TRACELORE_API_KEY", default=None, help="API key for --server [TRACELORE_API_KEY].")
@click.option(
    "--full", is_flag=True, help="With --server, send the whole log instead of the evidence selected locally."
)
@click.option(
    "--max-wait",
    type=click.FloatRange(min=0),
    default=60,
    show_default=True,
    help="With --server, the longest Retry-After (seconds) to wait out before giving up.",
)
@click.option(
    "--base-url",
    envvar="TRACELORE_BASE_URL",
    default=None,
    help="Address of the service for encyclopedia links [TRACELORE_BASE_URL; the --server URL in remote mode; "
    "in text, the local `tracelore serve` address].",
)
def diagnose(
    logs: tuple[str, ...],
    fmt: str,
    top: int | None,
    fail_on: str,
    reports: tuple[str, ...],
    signatures: Path | None,
    server: str | None,
    api_key: str | None,
    full: bool,
    max_wait: float,
    base_url: str | None,
) -> None:
    """Diagnose LOGS (files, .gz files, or - for standard input) as one job.

    Exit status: 0 nothing found (per --fail-on), 1 a failure was found, 2 usage, input or server error.
    """
    extra = _report_option(reports)
    if full and not server:
        raise click.UsageError("--full needs --server (locally the whole log is always read)")
    permalink = None
    try:
        if server:
            from app.remote import RemoteError

            try:
                remote = _remote(
                    logs, signatures, server=server, api_key=api_key, full=full, top=top, max_wait=max_wait
                )
            except RemoteError as exc:
                raise click.ClickException(str(exc)) from exc
            result, permalink = remote.diagnosis, remote.url
        else:
            from app.core.diagnose import diagnose_many

            library = _library(signatures)
            with _open_logs(logs) as opened:
                result = diagnose_many(opened, library, top=top, threads=scan_threads(), written=_written(logs))
    except (TraceloreError, OSError, EOFError, gzip.BadGzipFile) as exc:
        raise click.ClickException(getattr(exc, "detail", None) or str(exc)) from exc
    links = base_url if base_url is not None else (server or Settings().base_url)
    if not links and fmt == "text":
        # A terminal can open only a full address: the local service's, until one is configured.
        links = local_service_url()
        if result.candidates:
            click.echo(
                f"(links point at {links}, where `tracelore serve` runs; "
                "set --base-url or TRACELORE_BASE_URL to your service's address)",
                err=True,
            )
    click.echo(render(result, fmt, base_url=links, permalink=permalink), nl=False)
    for report_fmt, path in extra:
        try:
            path.write_text(render(result, report_fmt, base_url=links, permalink=permalink), encoding="utf-8")
        except OSError as exc:
            raise click.ClickException(
                f"cannot write the {report_fmt} report to {path}: {exc.strerror or exc}"
            ) from exc
    if permalink and fmt != "text":
        click.echo(f"Full diagnosis: {permalink}", err=True)
    sys.exit(1 if _failed(result, fail_on) else 0)


@main.command("lint")
@click.argument("path", type=click.Path(exists=True, path_type=Path), required=False)
@click.option("--skip", multiple=True, help="Skip a check by id (e.g. backtracking, examples).")
@click.option("--fail-on-warnings", is_flag=True, help="Exit 1 on warnings too.")
def lint_command(path: Path | None, skip: tuple[str, ...], fail_on_warnings: bool) -> None:
    """Check signature files: schema, patterns, references, taxonomy, examples."""
    from app.core.lint import lint as run_lint
    from app.core.lint import load_taxonomy

    root = path or Settings().signatures_dir
    root = root.resolve()
    folder = root if root.is_dir() else root.parent
    taxonomy_path = next(
        (p / TAXONOMY_FILE for p in (folder, *folder.parents) if (p / TAXONOMY_FILE).is_file()),
        None,
    )
    taxonomy = load_taxonomy(taxonomy_path, coverage=taxonomy_path.parent == root.resolve()) if taxonomy_path else None
    report = run_lint(root, taxonomy=taxonomy, skip=skip)
    for issue in report.issues:
        click.echo(str(issue), err=issue.severity == "error")
    click.echo(report.summary())
    if report.errors or (fail_on_warnings and report.warnings):
        sys.exit(1)


def _safe_url(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


@main.command()
@click.option("--host", default=None, help="Address to bind [TRACELORE_HOST, default 127.0.0.1].")
@click.option("--port", type=click.IntRange(0, 65535), default=None, help="Port [TRACELORE_PORT, default 8000].")
@click.option("--workers", type=click.IntRange(1, 64), default=None, help="Worker processes [TRACELORE_WORKERS].")
@click.option("--database-url", default=None, help="SQLAlchemy URL [TRACELORE_DATABASE_URL, default SQLite].")
def serve(host: str | None, port: int | None, workers: int | None, database_url: str | None) -> None:
    """Migrate the database, then serve the web app and API."""
    from app.metrics_dir import metrics_directory
    from app.store.migrate import upgrade

    # Workers build their own Settings from the environment (uvicorn factory mode): flags go there first.
    for name, value in (("HOST", host), ("PORT", port), ("WORKERS", workers), ("DATABASE_URL", database_url)):
        if value is not None:
            os.environ[f"TRACELORE_{name}"] = str(value)
    settings = Settings()
    url = settings.effective_database_url
    try:
        upgrade(url)
    except Exception as exc:  # a CLI boundary: say what failed, not a traceback
        raise click.ClickException(f"cannot migrate the database at {_safe_url(url)}: {exc}") from exc
    # Every worker writes its metrics to one directory, so any worker's /metrics is the whole server's.
    with metrics_directory():
        _serve(settings, url)


def _serve(settings: Settings, url: str) -> None:
    import uvicorn

    from app.web.app import create_app

    try:
        # Load the library once here: a broken library fails now, before any worker starts.
        app = create_app(settings)
    except LibraryError as exc:
        raise click.ClickException(f"the signature library is broken:\n{exc.detail}") from exc
    shown = "localhost" if settings.host in ("0.0.0.0", "::") else settings.host
    click.echo(f"Tracelore {__version__}: database {_safe_url(url)}, {len(app.state.library)} signatures")
    click.echo(f"Tracelore is serving on http://{shown}:{settings.port}/ (Ctrl+C to stop)")
    run = functools.partial(
        uvicorn.run,
        host=settings.host,
        port=settings.port,
        proxy_headers=True,
        forwarded_allow_ips=settings.forwarded_allow_ips,
        timeout_graceful_shutdown=30,
    )
    if settings.workers > 1:
        app.state.engine.dispose()
        run("app.web.app:create_app", factory=True, workers=settings.workers)
    else:
        run(app)


@main.group()
def db() -> None:
    """Database migrations (the URL comes from TRACELORE_DATABASE_URL)."""


@db.command("upgrade")
@click.argument("revision", default="head")
def db_upgrade(revision: str) -> None:
    """Migrate the database up to REVISION (default: head)."""
    from app.store.migrate import current, upgrade

    url = Settings().effective_database_url
    upgrade(url, revision)
    click.echo(f"{_safe_url(url)} is at revision {current(url)}")


@db.command("downgrade")
@click.argument("revision")
def db_downgrade(revision: str) -> None:
    """Migrate the database down to REVISION ("base" removes every table)."""
    from app.store.migrate import current, downgrade

    url = Settings().effective_database_url
    downgrade(url, revision)
    click.echo(f"{_safe_url(url)} is at revision {current(url) or 'base'}")


@db.command("current")
def db_current() -> None:
    """Print the revision the database is at."""
    from app.store.migrate import current

    url = Settings().effective_database_url
    click.echo(current(url) or "base (not migrated)")


@main.command("purge")
@click.option(
    "--days",
    type=click.IntRange(min=1),
    default=None,
    help="Delete diagnoses older than this many days [TRACELORE_RETENTION_DAYS, default 30].",
)
def purge(days: int | None) -> None:
    """Delete stored diagnoses older than the retention time, old quota counters and spent sign-in
    links, now (the service also does it hourly)."""
    from app.retention import COUNTER_DAYS, purge_once
    from app.store.db import make_engine, make_sessionmaker

    settings = Settings()
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


@main.command("build-site")
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--base-url", default="", help="Public URL the site will be hosted at (canonical links, sitemap.xml).")
@click.option(
    "--service-url",
    default=None,
    help="A Tracelore service the pages link to for diagnosis and search [default TRACELORE_BASE_URL; '' for none].",
)
@SIGNATURES
def build_site_command(out: Path, base_url: str, service_url: str | None, signatures: Path | None) -> None:
    """Write the failure encyclopedia to OUT as a static site (relative links, no service needed)."""
    from app.web.site import build_site, check_output
    from app.web.templating import make_templates

    for name, url in (("--base-url", base_url), ("--service-url", service_url or "")):
        if url and not url.startswith(("http://", "https://")):
            raise click.BadParameter(f"expected an http(s) URL, got {url!r}", param_hint=name)
    service = Settings().base_url if service_url is None else service_url
    try:
        check_output(out)  # before the library loads: a wrong folder fails at once
        library = _library(signatures)
        pages = build_site(library, make_templates().env, out, base_url=base_url, service_url=service)
    except (TraceloreError, OSError) as exc:
        raise click.ClickException(getattr(exc, "detail", None) or str(exc)) from exc
    click.echo(f"wrote {pages} pages for {len(library)} entries to {out}")


@main.group()
def admin() -> None:
    """Accounts, tiers, API keys and usage (the database comes from TRACELORE_DATABASE_URL)."""


@contextlib.contextmanager
def _store() -> Iterator[Session]:
    from sqlalchemy.exc import SQLAlchemyError

    from app.store.db import make_engine, make_sessionmaker

    url = Settings().effective_database_url
    engine = make_engine(url)
    try:
        with make_sessionmaker(engine).begin() as session:
            yield session
    except SQLAlchemyError as exc:
        raise click.ClickException(
            f"the database at {_safe_url(url)} is not usable (is it migrated? `tracelore db upgrade`): {exc}"
        ) from exc
    finally:
        engine.dispose()


@admin.command("set-tier")
@click.argument("email")
@click.argument("tier", type=click.Choice(["free", "verified", "pro"]))
def admin_set_tier(email: str, tier: str) -> None:
    """Put the account of EMAIL on TIER (the account is created if there is none)."""
    from app.store import accounts

    with _store() as session:
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

    with _store() as session:
        account = accounts.set_admin(session, email, not revoke)
    if account is None:
        raise click.ClickException(f"no account for {email}: it is created when that address first signs in")
    click.echo(f"{account.email} is {'an admin' if account.is_admin else 'no longer an admin'}")


@admin.command("create-key")
@click.argument("email")
@click.option("--name", default="CI", show_default=True, help="What the key is for.")
def admin_create_key(email: str, name: str) -> None:
    """Create an API key for EMAIL (creating the account if needed); the key is printed once, on stdout."""
    from app.store import accounts

    with _store() as session:
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

    with _store() as session:
        revoked = accounts.revoke_api_key(session, key.strip(), now=accounts.utcnow())
    if revoked is None:
        raise click.ClickException(f"no single API key matches {key[:16]!r}; give its id or its full prefix")
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
    with _store() as session:
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


# ClickException exits 1 by default; input and usage errors exit 2 like grep's.
click.ClickException.exit_code = 2
