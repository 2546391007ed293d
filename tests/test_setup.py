"""Set-up as a new user meets it: `make serve` on a fresh copy installs only what serving needs."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

from tests.support import REPO, wait_until_ready

DEV_ONLY = {"pytest", "ruff", "mypy", "playwright", "hypothesis", "schemathesis", "aiosmtpd", "junitparser"}


def _fresh_copy(dest: Path) -> None:
    """The files a clone would have (tracked ones, as they are in the working tree now)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def test_make_serve_on_a_fresh_copy_serves_without_dev_tools(tmp_path: Path) -> None:
    clone = tmp_path / "tracelore"
    _fresh_copy(clone)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = getattr(sys, "_base_executable", sys.executable)
    env = {
        **os.environ,
        "TRACELORE_PORT": str(port),
        "TRACELORE_DATA_DIR": str(tmp_path / "data"),
        "TRACELORE_CACHE_DIR": "",
    }
    env.pop("TRACELORE_DATABASE_URL", None)
    env.pop("VIRTUAL_ENV", None)
    proc = subprocess.Popen(
        ["make", "serve", f"PYTHON={base}"],
        cwd=clone,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # make and the server it starts are stopped together below
    )
    try:
        wait_until_ready(proc, f"http://127.0.0.1:{port}", seconds=600)
        listed = subprocess.run(
            [clone / ".venv" / "bin" / "python", "-m", "pip", "list", "--format=json"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        installed = {p["name"].lower() for p in json.loads(listed)}
        assert "tracelore" in installed and "fastapi" in installed
        assert not installed & DEV_ONLY, f"make serve installed development tools: {sorted(installed & DEV_ONLY)}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


def _answers(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _postgresql_store_tests(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The store's PostgreSQL tests, run by pytest in a process of their own with `env`."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/store/test_diagnoses.py"]
    return subprocess.run(
        [*command, "-k", "postgresql"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )


def test_without_the_variable_a_local_postgresql_is_used_and_skips_are_summed_up() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRACELORE_TEST_DATABASE_URL"}
    run = _postgresql_store_tests(env)
    if _answers(5432):  # this machine has a server: the PostgreSQL tests run against it
        assert run.returncode == 0 and " passed" in run.stdout and "skipped" not in run.stdout, run.stdout[-2000:]
    else:  # none: they are skipped, and the end of the run says how many and why
        assert re.search(r"-+ \d+ tests? skipped -+\n\s+\d+  no PostgreSQL: ", run.stdout), run.stdout[-2000:]
    # Set empty, the variable asks for SQLite only, and the summary says so.
    empty = _postgresql_store_tests({**env, "TRACELORE_TEST_DATABASE_URL": ""})
    assert re.search(r"-+ \d+ tests? skipped -+\n\s+\d+  TRACELORE_TEST_DATABASE_URL is set empty", empty.stdout), (
        empty.stdout
    )
