"""Memory under hostile uploads: a real `tracelore serve` process, its peak resident memory read from /proc.

Concurrent large JSON logs, gzip-encoded JSON bombs, excerpts of many lines or of very long lines
and large pasted form fields must keep the server within the budget docs/self-hosting.md states (bench/uploads.py
prints the same measurement by kind).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.uploads import MiB, all_at_once, budget, escape_dense, measure

LIMIT = 64 * MiB  # the anonymous tier's largest log on this server
IN_FLIGHT = 4

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/<pid>/status")


def test_hostile_uploads_at_once_stay_within_the_memory_budget(signatures_dir: Path) -> None:
    bodies, expected = all_at_once(LIMIT)
    growth, statuses = measure(bodies, limit=LIMIT, in_flight=IN_FLIGHT, signatures=signatures_dir)
    # Within the limit: diagnosed, none shed; over it, bombs included: 413.
    assert statuses == expected
    allowed = budget(bodies, IN_FLIGHT)
    assert growth <= allowed, f"peak memory grew by {growth / MiB:.0f} MiB (budget {allowed / MiB:.0f} MiB)"


def test_escape_dense_json_logs_stay_within_the_memory_budget(signatures_dir: Path) -> None:
    """64 JSON logs of `\\\\` escapes being read at once: each held ~30 MiB in the string parser (issue #38)."""
    body, status = escape_dense()
    bodies = [body] * 64
    growth, statuses = measure(bodies, limit=LIMIT, in_flight=IN_FLIGHT, signatures=signatures_dir)
    assert statuses == {status: 64}
    allowed = budget(bodies, IN_FLIGHT)
    assert growth <= allowed, f"peak memory grew by {growth / MiB:.0f} MiB (budget {allowed / MiB:.0f} MiB)"
