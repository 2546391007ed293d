"""Commands that run the web layer: `tracelore serve` and `tracelore build-site`."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

import click

from app import __version__
from app.cli.context import current, safe_url
from app.cli.errors import CommandError
from app.cli.options import SIGNATURES
from app.errors import LibraryError, TraceloreError
from app.web.state import state_of

if TYPE_CHECKING:
    from app.config import Settings


@click.command()
@click.option("--host", default=None, help="Address to bind [TRACELORE_HOST, default 127.0.0.1].")
@click.option("--port", type=click.IntRange(0, 65535), default=None, help="Port [TRACELORE_PORT, default 8000].")
@click.option("--workers", type=click.IntRange(1, 64), default=None, help="Worker processes [TRACELORE_WORKERS].")
@click.option("--database-url", default=None, help="SQLAlchemy URL [TRACELORE_DATABASE_URL, default SQLite].")
@click.option(
    "--local/--no-local",
    default=None,
    help="Single-user mode for this machine: no daily allowance, no sign-in [TRACELORE_LOCAL; `make serve` sets it].",
)
def serve(
    host: str | None, port: int | None, workers: int | None, database_url: str | None, local: bool | None
) -> None:
    """Migrate the database, then serve the web app and API."""
    from app.store.migrate import upgrade
    from app.web.metrics_dir import metrics_directory

    # Workers build their own Settings from the environment (uvicorn factory mode): flags go there first.
    state = current()
    state.configure(
        host=host, port=port, workers=workers, database_url=database_url, local=None if local is None else int(local)
    )
    settings = state.settings
    check_port_free(settings.host, settings.port)
    url = settings.effective_database_url
    try:
        upgrade(url)
    except Exception as exc:  # a CLI boundary: say what failed, not a traceback
        raise CommandError(f"cannot migrate the database at {safe_url(url)}: {exc}") from exc
    # Every worker writes its metrics to one directory, so any worker's /metrics is the whole server's.
    with metrics_directory():
        _serve(settings, url)


def check_port_free(host: str, port: int) -> None:
    """Fail with one clear line when something already listens on the address, before start-up
    (uvicorn would say so only after the database and the library were ready, as a traceback)."""
    import socket

    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise CommandError(f"cannot serve on {host}: {exc.strerror or exc}") from None
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As uvicorn binds: an address a closed connection left in TIME_WAIT is free to reuse.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise CommandError(
                f"port {port} on {host} is in use ({exc.strerror or exc}): stop what listens there, or choose"
                " another port with --port (TRACELORE_PORT; `make serve PORT=8081`)"
            ) from None


def _serve(settings: Settings, url: str) -> None:
    import uvicorn

    from app.web.app import create_app

    try:
        # Load the library once here: a broken library fails now, before any worker starts.
        app = create_app(settings)
    except LibraryError as exc:
        raise CommandError(f"the signature library is broken:\n{exc.detail}") from exc
    shown = "localhost" if settings.host in ("0.0.0.0", "::") else settings.host
    click.echo(f"Tracelore {__version__}: database {safe_url(url)}, {len(state_of(app).library)} signatures")
    click.echo(f"Tracelore is serving on http://{shown}:{settings.port}/ (Ctrl+C to stop)")
    if settings.local:
        click.echo("Local mode: requests from this machine have no daily allowance and need no sign-in")
    run = functools.partial(
        uvicorn.run,
        host=settings.host,
        port=settings.port,
        proxy_headers=True,
        forwarded_allow_ips=settings.forwarded_allow_ips,
        timeout_graceful_shutdown=30,
    )
    if settings.workers > 1:
        state_of(app).engine.dispose()
        run("app.web.app:create_app", factory=True, workers=settings.workers)
    else:
        run(app)


@click.command("build-site")
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
    service = current().settings.base_url if service_url is None else service_url
    try:
        check_output(out)  # before the library loads: a wrong folder fails at once
        library = current().library(signatures)
        pages = build_site(library, make_templates().env, out, base_url=base_url, service_url=service)
    except (TraceloreError, OSError) as exc:
        raise CommandError(getattr(exc, "detail", None) or str(exc)) from exc
    click.echo(f"wrote {pages} pages for {len(library)} entries to {out}")
