"""The fast pass finds exactly the lines a plain per-line `regex` search finds."""

from __future__ import annotations

import io
from pathlib import Path

import regex

from app.core.library import Library
from app.core.matcher import matching_lines, scan_file
from app.core.reader import iter_chunks
from bench.loggen import generate


def plain_search(library: Library, data: bytes) -> set[int]:
    """Each pattern on each carriage-return frame of each line, with a backtracking engine."""
    compiled = [regex.compile(p.encode().decode("latin-1"), regex.ASCII) for p in library.regexes]
    found = set()
    for no, line in enumerate(data.split(b"\n"), 1):
        frames = line.decode("latin-1").split("\r")
        if any(c.search(frame) for frame in frames for c in compiled):
            found.add(no)
    return found


def test_fast_pass_equals_plain_search(shipped_library: Library, tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    generate(log, 150_000, seed=3)
    data = log.read_bytes()
    # Small blocks: many chunk boundaries, each a chance to lose or double a line.
    fast = set(matching_lines(shipped_library, iter_chunks(io.BytesIO(data), block=8192)))
    assert fast == plain_search(shipped_library, data)
    assert len(fast) > 100


def test_threads_do_not_change_the_result(shipped_library: Library, tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    generate(log, 300_000, seed=5)
    one = scan_file(shipped_library, iter_chunks(log, block=16384), name="a", index=0, threads=1)
    two = scan_file(shipped_library, iter_chunks(log, block=16384), name="a", index=0, threads=2)
    assert one.lines == two.lines and one.progress == two.progress
    assert {i: (h.count, h.lines, [x.line.no for x in h.first]) for i, h in one.hits.items()} == {
        i: (h.count, h.lines, [x.line.no for x in h.first]) for i, h in two.hits.items()
    }
