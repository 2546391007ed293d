"""`tracelore watch`: diagnose logs while the job writes them.

Registered on the `tracelore` group by app/cli/__init__.py. The file following is app/watch/follow.py, the
engine app/core/engine/live.py; this module runs the loop: read what was appended, diagnose when
something arrived, report when the causal picture changes, end on --exit-on, --idle-timeout,
the end of standard input or a signal.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import click

from app.cli.heap import fix_mmap_threshold
from app.cli.options import SIGNATURES
from app.cli.watch_reports import Notifier, Permalinks
from app.cli.watch_sources import Files, Stdin
from app.core import Diagnosis
from app.core.engine import LiveJob
from app.core.rendering import render_text
from app.watch.follow import Follower

# Diagnose at most this often while lines pour in: ranking a job of many files costs tens of
# milliseconds a time; reports still come well within 2 s of their line.
MIN_INTERVAL = 0.5
# Look at the files at least this often without a change reported (missed events, network file systems).
RESCAN_EVERY = 5.0
# With --exit-on and only echoes found (a peer closed, a watchdog fired), how long to wait for
# the failure they echo to land in another rank's file before ending without it.
ECHO_WAIT = 10.0


def picture(d: Diagnosis | None) -> tuple[object, ...]:
    """What a report says about the job's failure: a new report is printed only when this changes."""
    if d is None or not (d.candidates or d.unrecognised_start or d.hang):
        return ()  # nothing to report yet
    return (
        tuple((c.id, c.role, c.episode, c.file, c.line) for c in d.candidates),
        (d.unrecognised_start.file, d.unrecognised_start.line) if d.unrecognised_start else None,
        d.hang.rank if d.hang else None,
    )


def _found(d: Diagnosis | None, level: str) -> bool:
    from app.cli.diagnose import failed as _failed

    return d is not None and _failed(d, level)


@click.command("watch")
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--exit-on",
    type=click.Choice(["never", "likely", "any"]),
    default="never",
    show_default=True,
    help="End as soon as a finding of this level is in (after --settle), with exit status 1.",
)
@click.option(
    "--settle",
    type=click.FloatRange(min=0),
    default=2.0,
    show_default=True,
    help="With --exit-on, seconds to keep reading after the finding (other ranks' lines land) before ending.",
)
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="End when no file has grown for this many seconds.",
)
@click.option(
    "--notify",
    "notify",
    metavar="CMD",
    default=None,
    help="Run CMD (a shell command) with the diagnosis JSON on standard input whenever the report changes.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text reports for a terminal, or one Diagnosis JSON per line for a script.",
)
@click.option("--top", type=click.IntRange(min=1), default=None, help="Show at most N candidates.")
@click.option(
    "--server",
    envvar="TRACELORE_SERVER",
    default=None,
    help="Also send the initiating failure's evidence to this Tracelore server for a permalink [TRACELORE_SERVER].",
)
@click.option("--api-key", envvar="TRACELORE_API_KEY", default=None, help="API key for --server [TRACELORE_API_KEY].")
@click.option(
    "--base-url",
    envvar="TRACELORE_BASE_URL",
    default=None,
    help="Address of the service the encyclopedia links point at [TRACELORE_BASE_URL; the --server URL].",
)
@click.option("--poll", is_flag=True, help="Poll the files instead of waiting for the kernel's change events.")
@SIGNATURES
def watch_command(
    paths: tuple[str, ...],
    exit_on: str,
    settle: float,
    idle_timeout: float | None,
    notify: str | None,
    fmt: str,
    top: int | None,
    server: str | None,
    api_key: str | None,
    base_url: str | None,
    poll: bool,
    signatures: Path | None,
) -> None:
    """Follow growing logs (files, folders of per-rank files, or - for standard input) and report
    the job's first failure as soon as its evidence is written.

    The report is printed again whenever the causal picture changes (an earlier cause arrives,
    echoes are sorted). Exit status: 1 a failure was found (at --exit-on's level, else any),
    0 none, 2 usage error.
    """
    from app.cli.context import library as _library

    fix_mmap_threshold()  # before the first block is read: see app/cli/heap.py
    if "-" in paths and len(paths) > 1:
        raise click.UsageError("standard input (-) is watched alone: pass either - or paths")
    follower_files, follower_dirs = [], []
    if paths != ("-",):
        for p in paths:
            path = Path(p)
            if path.suffix in (".gz", ".bz2", ".xz", ".zst"):
                raise click.UsageError(f"cannot watch {p}: a compressed file does not grow; use tracelore diagnose")
            if _is_dir(path):
                follower_dirs.append(path)
            elif path.parent.is_dir() or path.exists():
                follower_files.append(path)  # followed once it exists
            else:
                raise click.UsageError(f"cannot watch {p}: its folder {path.parent} does not exist")
    library = _library(signatures)
    job = LiveJob(library)
    source: Stdin | Files
    if paths == ("-",):
        source = Stdin(job)
    else:
        source = Files(job, Follower(job, follower_files, follower_dirs), poll=poll)
    permalinks = Permalinks(server, api_key, top)
    status = _run(
        job,
        source,
        exit_on=exit_on,
        settle=settle,
        idle_timeout=idle_timeout,
        notify=notify,
        fmt=fmt,
        top=top,
        permalinks=permalinks,
        links=base_url if base_url is not None else (server or ""),
    )
    sys.exit(status)


def _run(
    job: LiveJob,
    source: Stdin | Files,
    *,
    exit_on: str,
    settle: float,
    idle_timeout: float | None,
    notify: str | None,
    fmt: str,
    top: int | None,
    permalinks: Permalinks,
    links: str = "",
) -> int:
    stop = threading.Event()

    def stopping() -> None:
        stop.set()
        if isinstance(source, Files):
            source.waiter.stop.set()  # wakes a wait on the kernel's events

    previous = _on_signals(stopping)
    notifier = Notifier(notify)
    shown: tuple[object, ...] = ()
    reports = 0
    click.echo(f"tracelore watch: following {_describe(source)} ({source.mode}); Ctrl-C ends", err=True)

    def report(d: Diagnosis, *, final: bool = False) -> None:
        nonlocal shown, reports
        key = picture(d)
        if key == shown and not final:
            return
        heading = "final report" if final else ("first report" if reports == 0 else "report updated")
        if fmt == "json":
            click.echo(d.model_dump_json())
        else:
            click.echo(f"=== tracelore watch {datetime.now():%H:%M:%S}: {heading} ===")
            click.echo(render_text(d, base_url=links), nl=False)
        sys.stdout.flush()
        if key != shown and d.candidates:
            notifier.send(d)
            permalinks.send(d, job)
        shown, reports = key, reports + 1

    ending_at: float | None = None
    last_growth = last_look = time.monotonic()
    last_diagnosis = 0.0
    dirty = True
    d: Diagnosis | None = None
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(_restore_signals, previous)
        cleanup.callback(source.close)  # closed first, then the signals restored
        while not stop.is_set():
            t = time.monotonic()
            if source.poll():
                last_growth, dirty = t, True
            last_look = t
            if source.ended:
                break
            if dirty and t - last_diagnosis >= MIN_INTERVAL:
                d = job.diagnose(top=top, written=source.written())
                dirty, last_diagnosis = False, t
                if d is not None and picture(d) != shown:
                    report(d)
                if exit_on != "never" and _found(d, exit_on):
                    assert d is not None
                    initiating = any(c.role == "initiating" for c in d.candidates)
                    end = t + (settle if initiating else max(settle, ECHO_WAIT))
                    ending_at = end if ending_at is None else min(ending_at, end)
            if ending_at is not None and t >= ending_at:
                break
            if idle_timeout is not None and t - last_growth >= idle_timeout:
                break
            waits = [RESCAN_EVERY - (t - last_look)]
            if dirty:
                waits.append(last_diagnosis + MIN_INTERVAL - t)
            if ending_at is not None:
                waits.append(ending_at - t)
            if idle_timeout is not None:
                waits.append(last_growth + idle_timeout - t)
            source.wait(max(0.01, min(waits)))
        source.poll()
        source.flush()
        d = job.diagnose(top=top, written=source.written())
    if d is None:
        click.echo("tracelore watch: no log lines arrived (nothing to diagnose)", err=True)
        return 0
    report(d, final=True)
    notifier.join()
    permalinks.join()
    return 1 if _found(d, exit_on if exit_on != "never" else "any") else 0


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a link that loops: a file that cannot be read, said so when it is tried
        return False


def _describe(source: Stdin | Files) -> str:
    if isinstance(source, Stdin):
        return "standard input"
    names = [str(f) for f in source.follower.files] + [f"{d}/" for d in source.follower.dirs]
    return ", ".join(names)


def _on_signals(stop: Callable[[], object]) -> dict[int, object]:
    """SIGINT and SIGTERM end the watch with a final report, as the end of the input would."""

    def handler(*_: object) -> None:
        stop()

    previous: dict[int, object] = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError):  # not the main thread
            previous[sig] = signal.signal(sig, handler)
    return previous


def _restore_signals(previous: dict[int, object]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)  # type: ignore[arg-type]


@click.command("lsp")
@click.option(
    "--base-url",
    envvar="TRACELORE_BASE_URL",
    default=None,
    help="Address of the service the encyclopedia links point at [TRACELORE_BASE_URL].",
)
@SIGNATURES
def lsp_command(base_url: str | None, signatures: Path | None) -> None:
    """Run the language server for log files over standard input and output (for editors)."""
    from app.cli.context import library as _library

    try:
        from app.lsp.server import make_server
    except ImportError as exc:
        click.echo(
            f"tracelore lsp needs the language server packages ({exc.name} is missing): pip install 'tracelore[lsp]'",
            err=True,
        )
        sys.exit(2)
    fix_mmap_threshold()  # documents are fed for as long as the editor runs: see app/cli/heap.py
    make_server(_library(signatures), base_url=base_url or "").start_io()
