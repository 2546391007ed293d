"""CPU time, the steadier measure on a shared machine: of a process tree (from /proc), and of `diagnose()`.

A server's CPU seconds per answered request, beside the in-process `diagnose()` of the same log,
say what a request costs beyond the diagnosis without a stopwatch: other processes on the machine
slow both alike.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            kids += [int(k) for k in task.read_text().split()]
        except OSError:
            continue
    return kids


def tree_cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process and all its descendants (every thread), now."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime
        todo += _children(p)
    return total


def diagnose_cpu_ms(log: bytes, *, signatures: Path | None, repeat: int = 200) -> float:
    """CPU milliseconds of one in-process `diagnose()` of `log` (the library loaded and warm), median of batches."""
    from app.config import Settings
    from app.core.engine.diagnose import diagnose
    from app.core.knowledge.loading import load_library

    settings = Settings()
    library = load_library(signatures or settings.signatures_dir, cache=settings.cache_dir)
    for _ in range(20):  # warm: per-pattern engines compile on first use
        diagnose(log, library)
    batches = []
    for _ in range(5):
        started = time.process_time()
        for _ in range(max(1, repeat // 5)):
            diagnose(log, library)
        batches.append((time.process_time() - started) / max(1, repeat // 5) * 1000)
    return sorted(batches)[len(batches) // 2]
