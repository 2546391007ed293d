"""What `tracelore watch` does with a new picture besides printing it: run the --notify
command, and with --server send the initiating failure's evidence for a permalink.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import click

from app.core import Diagnosis
from app.core.engine import LiveJob

NOTIFY_TIMEOUT = 60.0  # seconds a --notify command may run


class Notifier:
    """Runs --notify commands with the diagnosis JSON on standard input, without holding up the watch."""

    def __init__(self, command: str | None) -> None:
        self.command = command
        self.threads: list[threading.Thread] = []

    def send(self, d: Diagnosis) -> None:
        if not self.command:
            return
        payload = d.model_dump_json().encode("utf-8")
        thread = threading.Thread(target=self._run, args=(self.command, payload), daemon=True)
        thread.start()
        self.threads = [t for t in self.threads if t.is_alive()] + [thread]

    @staticmethod
    def _run(command: str, payload: bytes) -> None:
        try:
            done = subprocess.run(
                command, shell=True, input=payload, timeout=NOTIFY_TIMEOUT, check=False, capture_output=True
            )
        except subprocess.TimeoutExpired:
            click.echo(
                f"tracelore watch: --notify command still running after {NOTIFY_TIMEOUT:.0f} s: stopped", err=True
            )
            return
        except OSError as exc:
            click.echo(f"tracelore watch: --notify command could not start: {exc}", err=True)
            return
        if done.returncode != 0:
            detail = done.stderr.decode("utf-8", errors="replace").strip()[-500:]
            click.echo(f"tracelore watch: --notify command exited {done.returncode}: {detail}", err=True)

    def join(self) -> None:
        deadline = time.monotonic() + NOTIFY_TIMEOUT
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))


# Permalinks asked of --server per run at most: each one counts against the daily allowance.
MAX_PERMALINKS = 3
SEND_TIMEOUT = 30.0  # seconds one --server request may take, answer and all (the watch's exit waits at most this)


class Permalinks:
    """With --server: the evidence of the initiating failure's file sent once per new picture.

    Sent in the background (the watch never waits on the network); the permalink is said on
    standard error when it comes back.
    """

    def __init__(self, server: str | None, api_key: str | None, top: int | None, timeout: float = SEND_TIMEOUT) -> None:
        self.server, self.api_key, self.top = server, api_key, top
        self.timeout = timeout  # for each request: a server that trickles its answer is given up on
        self.sent: set[tuple[object, ...]] = set()
        self.threads: list[threading.Thread] = []
        self.started: list[float] = []

    def send(self, d: Diagnosis, job: LiveJob) -> None:
        if not self.server or not d.candidates or len(self.sent) >= MAX_PERMALINKS:
            return
        first = next((c for c in d.candidates if c.role == "initiating"), d.candidates[0])
        key = (first.id, first.file, first.line)
        if key in self.sent:
            return
        self.sent.add(key)
        excerpt = shown_lines(d, first.file)
        scan = next((s for s in job.files.values() if s.name == first.file), None)
        total_lines = max(scan.lines if scan else 0, excerpt[-1][0] if excerpt else 0)
        total_bytes = scan.fed if scan else 0
        name = Path(first.file or "log").name
        thread = threading.Thread(target=self._post, args=(excerpt, total_lines, total_bytes, name), daemon=True)
        thread.start()
        self.threads.append(thread)
        self.started.append(time.monotonic())

    def _post(self, excerpt: list[tuple[int, str]], total_lines: int, total_bytes: int, name: str) -> None:
        from app.client.remote import post_excerpt
        from app.errors import RemoteError

        assert self.server is not None
        try:
            result = post_excerpt(
                self.server,
                excerpt,
                total_lines=total_lines,
                total_bytes=total_bytes,
                filename=name,
                top=self.top,
                api_key=self.api_key,
                max_wait=0,
                notify=lambda message: click.echo(f"tracelore watch: {message}", err=True),
                timeout=self.timeout,
            )
        except (RemoteError, OSError) as exc:
            click.echo(f"tracelore watch: --server: {exc}", err=True)
            return
        if result.url:
            click.echo(f"tracelore watch: full diagnosis: {result.url}", err=True)

    def join(self) -> None:
        """Wait for the requests in flight, each at most until its own deadline (then it has ended anyway)."""
        for thread, started in zip(self.threads, self.started, strict=True):
            thread.join(max(0.0, started + self.timeout + 1 - time.monotonic()))


def shown_lines(d: Diagnosis, file: str | None) -> list[tuple[int, str]]:
    """The lines of one file a diagnosis shows (evidence, unexplained, the unrecognised start)."""
    lines: dict[int, str] = {}
    for c in d.candidates:
        for e in c.evidence:
            if e.file == file:
                lines[e.line] = e.text
    for u in d.unexplained:
        if u.file == file:
            lines[u.line] = u.text
    if d.unrecognised_start is not None and d.unrecognised_start.file == file:
        lines[d.unrecognised_start.line] = d.unrecognised_start.text
    return sorted(lines.items())
