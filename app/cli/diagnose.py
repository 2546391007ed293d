"""`tracelore diagnose`: logs in, a report out, in one process or on a Tracelore server (remote mode).

Exit codes follow grep: 0 nothing found, 1 failure identified, 2 usage or input error.
"""

from __future__ import annotations

import functools
import gzip
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from app import __version__
from app.cli.context import current, scan_threads
from app.cli.errors import CommandError
from app.cli.logs import open_logs, progress_line, written
from app.cli.options import SIGNATURES
from app.core import Diagnosis
from app.core.models import LIKELY
from app.core.rendering import FORMATS, Links, render_report
from app.errors import TraceloreError

# What only one mode needs (the HTTP client, the evidence rules) is imported when it runs.
if TYPE_CHECKING:
    from app.core.stored import StoredDiagnosis


def failed(d: Diagnosis, fail_on: str) -> bool:
    """Whether the findings make the exit status 1 under --fail-on (never, likely, any)."""
    if fail_on == "never":
        return False
    threshold = LIKELY if fail_on == "likely" else 0.0
    return any(c.episode == "terminal" and c.confidence >= threshold for c in d.candidates)


def render(d: Diagnosis, fmt: str, *, base_url: str = "", permalink: str | None = None) -> str:
    """The report of a diagnosis in one of FORMATS (remote mode's JSON is the same Diagnosis JSON)."""
    return render_report(d, fmt, Links(base_url=base_url, permalink=permalink, tool_version=__version__))


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
    from app.client.remote import fetch_spec, human_size, padded_log, post_excerpt, post_log

    options: dict[str, Any] = {
        "api_key": api_key,
        "top": top,
        "max_wait": max_wait,
        "notify": lambda message: click.echo(message, err=True),
    }
    # The browser's selection rules, as the server publishes them for its own library.
    spec = None if full else fetch_spec(server, api_key=api_key)
    if len(logs) > 1:
        return _remote_job(logs, signatures, spec, server=server, full=full, options=options)
    with open_logs(logs) as opened, progress_line() as shown:
        name, stream = opened[0]
        filename = Path(name or "log").name
        blocks = shown.reading(name, iter(lambda: stream.read(4 << 20), b""))
        if full:
            payload = b"".join(blocks)
            shown.clear()
            click.echo(f"Sending {name}: the whole log, {human_size(len(payload))}", err=True)
            return post_log(server, payload, filename=filename, **options)
        from app.core.selection import prefilter_spec, select_evidence

        older = spec is None  # a server from before excerpts: same rules from the local library, sent as text
        excerpt = select_evidence(blocks, spec or prefilter_spec(current().library(signatures)), threads=scan_threads())
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


def _remote_job(
    logs: tuple[str, ...],
    signatures: Path | None,
    spec: dict[str, Any] | None,
    *,
    server: str,
    full: bool,
    options: dict[str, Any],
) -> StoredDiagnosis:
    """The logs of one job (one file per rank) sent together, as files of one request.

    Each file's evidence is sent as a log of the same length with the other lines left blank,
    so line numbers stay those of the file (blank lines cost next to nothing once gzipped).
    """
    from app.client.remote import human_size, padded_log, post_logs

    sent: list[tuple[str, bytes]] = []
    with open_logs(logs) as opened, progress_line() as shown:
        for name, stream in opened:
            blocks = shown.reading(name, iter(functools.partial(stream.read, 4 << 20), b""))
            if full:
                sent.append((Path(name or "log").name, b"".join(blocks)))
                continue
            from app.core.selection import prefilter_spec, select_evidence

            rules = spec or prefilter_spec(current().library(signatures))
            excerpt = select_evidence(blocks, rules, threads=scan_threads())
            sent.append((Path(name or "log").name, padded_log(excerpt.lines)))
        shown.clear()
    what = "the whole logs" if full else "the evidence of each"
    click.echo(f"Sending {len(sent)} files, {what}: {human_size(sum(len(b) for _, b in sent))}", err=True)
    return post_logs(server, sent, **options)


@click.command()
@click.argument("logs", nargs=-1, required=True)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="text for a terminal; json (the Diagnosis model); markdown; sarif, junit or github for CI.",
)
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
            from app.errors import RemoteError

            try:
                remote = _remote(
                    logs, signatures, server=server, api_key=api_key, full=full, top=top, max_wait=max_wait
                )
            except RemoteError as exc:
                raise CommandError(str(exc)) from exc
            result, permalink = remote.diagnosis, remote.url
        else:
            from app.core import diagnose_many

            library = current().library(signatures)
            with open_logs(logs) as opened, progress_line() as shown:
                result = diagnose_many(
                    opened, library, top=top, threads=scan_threads(), written=written(logs), progress=shown
                )
    except (TraceloreError, OSError, EOFError, gzip.BadGzipFile) as exc:
        raise CommandError(getattr(exc, "detail", None) or str(exc)) from exc
    links = base_url if base_url is not None else (server or current().settings.base_url)
    if not links and fmt == "text":
        # A terminal can open only a full address: the local service's, until one is configured.
        links = current().local_service_url()
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
            raise CommandError(f"cannot write the {report_fmt} report to {path}: {exc.strerror or exc}") from exc
    if permalink and fmt != "text":
        click.echo(f"Full diagnosis: {permalink}", err=True)
    sys.exit(1 if failed(result, fail_on) else 0)
