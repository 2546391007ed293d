"""What a long watch holds stays capped, and large buffers never come from glibc's heap.

Counted, not timed: many blocks are appended and rotated away, and after every look each
structure a watch keeps per file, per pattern and per rotated part is counted against its cap.
The resident memory over a real 10-minute run is measured by `bench/watch.py`.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app.core.engine import scanner as scanner_module
from app.core.engine.live import HEAD_KEEP, TAIL_KEEP, LiveJob, LiveScan
from app.core.engine.reader import MAX_CARRY
from app.core.engine.scanner import KEEP_ERRORS, KEEP_FIRST, PROGRESS_TAIL, UNSETTLED_CHUNKS
from app.core.knowledge.loading import Library
from app.watch import follow as watch_module
from app.watch.follow import KEEP_ROTATED, Follower
from bench.loggen import _noise, failure_cascade

ROOT = Path(__file__).resolve().parents[2]
RANKS = 2
BLOCK = 96 << 10  # bytes appended to each file per look
ROTATE_EVERY = 10  # looks between two rotations of a file
LOOKS = 60


def _assert_capped(scan: LiveScan, library: Library) -> None:
    scanner = scan._scanner
    assert scan.pending <= MAX_CARRY
    assert len(scan._head) <= HEAD_KEEP
    assert len(scan._tail) <= TAIL_KEEP
    assert len(scan._progress) <= PROGRESS_TAIL
    assert len(scanner.progress_chunks) <= 2
    assert len({id(piece) for piece in scanner.unsettled.values()}) <= UNSETTLED_CHUNKS
    assert len(scanner.located) <= len(library.compiled)
    errors = scanner.plan.error
    for idx, hits in scanner.scan.hits.items():
        assert len(hits.lines) <= scanner_module.KEEP_LINES
        assert len(hits.first) <= (KEEP_ERRORS if idx in errors else KEEP_FIRST)
    assert sum(len(h.first) for i, h in scanner.scan.hits.items() if i in errors) <= KEEP_ERRORS


def test_a_long_rotating_job_keeps_every_structure_under_its_cap(
    library: Library, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Caps small enough to be reached within the test's blocks and rotations.
    monkeypatch.setattr(watch_module, "REMEMBER_ROTATED", 3)
    monkeypatch.setattr(scanner_module, "KEEP_LINES", 128)
    job = LiveJob(library)
    follower = Follower(job, [], [tmp_path])
    rng, step = random.Random(7), 0
    logs = {r: tmp_path / f"rank{r}.log" for r in range(RANKS)}
    most_files = saturated = 0
    try:
        for look in range(LOOKS):
            for log in logs.values():
                pieces: list[bytes] = []
                while sum(map(len, pieces)) < BLOCK:
                    pieces += _noise(rng, RANKS, step)
                    step += 1
                with log.open("ab") as out:
                    out.write(b"".join(pieces))
                if look % ROTATE_EVERY == ROTATE_EVERY - 1:  # logrotate: a new file comes with the next block
                    os.replace(log, log.with_name(f"{log.name}.1"))
            while follower.poll():
                pass
            if look % 10 == 0:
                assert job.diagnose() is not None  # snapshots taken along the way hold nothing afterwards
            names = sorted(Path(k).name for k in job.files)
            assert len(job.files) <= RANKS * (1 + KEEP_ROTATED), names  # never a rotated part as a file of its own
            assert len(follower._rotated_away) <= 3
            assert all(len(kept) <= KEEP_ROTATED for kept in follower._rotated.values())
            for scan in job.files.values():
                _assert_capped(scan, library)
            most_files = max(most_files, len(job.files))
            saturated = max(
                saturated, sum(h.saturated for s in job.files.values() for h in s._scanner.scan.hits.values())
            )
        # The caps were reached, not merely never approached.
        assert most_files == RANKS * (1 + KEEP_ROTATED)
        assert len(follower._rotated_away) == 3
        assert saturated > 0
        with logs[RANKS - 1].open("ab") as out:
            out.write(failure_cascade(RANKS, failing=RANKS - 1))
        while follower.poll():
            pass
        final = job.diagnose()
        assert final is not None and final.candidates[0].id == "cuda.oom"
    finally:
        follower.close()


_HEAP_PROBE = textwrap.dedent(
    """
    import ctypes, sys
    from app.cli.heap import fix_mmap_threshold

    class Info(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = Info

    def mapped_for(size):
        before = libc.mallinfo2().hblks
        block = bytearray(size)
        mapped = libc.mallinfo2().hblks - before
        del block
        return mapped

    fixed = fix_mmap_threshold() if sys.argv[1:] == ["fix"] else False
    freed = bytearray(8 << 20)
    del freed  # a freed 8 MiB mapping: left to itself, glibc raises its threshold to 8 MiB
    print(fixed, mapped_for(2 << 20), mapped_for(16 << 20))
    """
)


def test_after_the_threshold_is_fixed_large_blocks_are_mapped_whatever_was_freed_before() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}

    def probe(*args: str) -> list[str]:
        run = subprocess.run(
            [sys.executable, "-c", _HEAP_PROBE, *args], cwd=ROOT, env=env, capture_output=True, text=True, check=True
        )
        return run.stdout.split()

    # Left alone, a 2 MiB block comes from the heap once 8 MiB was freed (the cause of the growth);
    # with the threshold fixed it has a mapping of its own, as a 16 MiB one has either way.
    assert probe() == ["False", "0", "1"]
    assert probe("fix") == ["True", "1", "1"]


def test_a_threshold_the_user_set_is_left_alone() -> None:
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "262144"}
    out = subprocess.run(
        [sys.executable, "-c", "from app.cli.heap import fix_mmap_threshold; print(fix_mmap_threshold())"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == "False"
