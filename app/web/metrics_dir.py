"""The directory where the worker processes of one `tracelore serve` keep their metrics.

`prometheus-client` in multiprocess mode writes each process's values to memory-mapped
files in PROMETHEUS_MULTIPROC_DIR and sums them at each scrape, so `/metrics` on any worker
is the whole server's. The library picks that mode when it is first imported, so the
variable is set here, before the web app (and `prometheus_client`) is imported and before
uvicorn starts its workers, which inherit it. This module imports no part of the library.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


@contextlib.contextmanager
def metrics_directory() -> Iterator[Path]:
    """PROMETHEUS_MULTIPROC_DIR for one server run, in the environment its workers inherit.

    When the operator set the variable, that directory is used, emptied first of the files
    an earlier run left (the library needs a clean directory at start: old counts would be
    summed in). Otherwise a new private temporary directory is made and removed when the
    server stops.
    """
    given = os.environ.get(MULTIPROC_ENV)
    if given:
        directory = Path(given)
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.db"):
            stale.unlink()
        yield directory
        return
    directory = Path(tempfile.mkdtemp(prefix="tracelore-metrics-"))
    os.environ[MULTIPROC_ENV] = str(directory)
    try:
        yield directory
    finally:
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(directory, ignore_errors=True)
