"""The fast pass finds exactly the lines a plain per-line `regex` search finds."""

from __future__ import annotations

import io
from pathlib import Path

import regex

from app.core.engine.file_scan import FileScan
from app.core.engine.matcher import matching_lines, scan_file
from app.core.engine.reader import Block, Chunk, count_newlines, iter_blocks, iter_chunks, make_line
from app.core.engine.scanner import KEEP_FIRST, KEEP_LINES, NARROW_FROM
from app.core.knowledge.loading import Library
from app.core.patterns.re2calls import find
from bench.dense import library_examples
from bench.loggen import generate
from tests.core.conftest import library, signature


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
    for threads in (2, 4):
        many = scan_file(shipped_library, iter_chunks(log, block=16384), name="a", index=0, threads=threads)
        assert one.lines == many.lines and one.progress == many.progress
        assert {i: (h.count, h.lines, [x.line.no for x in h.first]) for i, h in one.hits.items()} == {
            i: (h.count, h.lines, [x.line.no for x in h.first]) for i, h in many.hits.items()
        }


# Anchors, bounded repeats, classes holding ^ $ { and patterns that could run across a CR.
FRAME_PATTERNS = (
    r"^\s*Killed\s*$",
    r"^Traceback \(most recent call last\):$",
    r"foo.{0,5}bar",
    r"[^|]{3}\| *\d{1,3}/\d{1,3}$",
    r"[$^{]{2}x{1,2}$",
    r"\bdone\b",
)
FRAME_LINES = (
    b"Killed",
    b"  5%|#         | 1/20 [00:01<00:19]\rKilled",  # the killer's line follows a redraw
    b"  5%|#         | 1/20 [00:01<00:19]\r  Killed  \r",
    b"not Killed",
    b"Traceback (most recent call last):\r",  # CRLF-style ending
    b"x\rTraceback (most recent call last):",
    b"Traceback (most recent call last):x",
    b"foo\rbar",  # `.` must not carry a match across frames
    b"foo12bar",
    b"foo123456bar",  # beyond the bound: the relaxed Set sees it, the exact pattern does not
    b"abc| 12/999\rzz",
    b"ab\r| 1/2",
    b"^${x",
    b"$^xx\r",
    b"undone\rdone",
    b"\r\r\r",
    b"",
)


def test_frames_and_bounds_match_as_a_plain_search() -> None:
    lib = library(signature("t.frames", *((f"p{i}", p, 0.5) for i, p in enumerate(FRAME_PATTERNS))))
    data = b"\n".join(FRAME_LINES) + b"\n"
    fast = set(matching_lines(lib, iter_chunks(io.BytesIO(data))))
    assert fast == plain_search(lib, data)
    assert fast == {1, 2, 3, 5, 6, 9, 11, 13, 14, 15}


def test_a_hit_is_recorded_with_the_frame_that_matches() -> None:
    lib = library(signature("t.killed", ("killed", r"^\s*Killed\s*$", 0.9)))
    data = b"start\n 5%|#   | 1/20 [00:01<00:19]\rKilled\rtail\nfoo\n"
    scan = scan_file(lib, iter_chunks(io.BytesIO(data)), name="a", index=0, threads=1)
    (hits,) = [h for i, h in scan.hits.items() if any(r.signature == "t.killed" for r in lib.rules[i])]
    assert hits.count == 1 and hits.lines == [2]
    assert [h.line.text for h in hits.first] == ["Killed"]


def _signature_of(scan: FileScan) -> tuple[object, ...]:
    return (
        scan.bytes,
        scan.lines,
        scan.progress,
        [(x.no, x.text) for x in scan.edge_lines],
        {
            i: (h.count, h.lines, h.last_line, [(x.line.no, x.line.text, x.span) for x in h.first])
            for i, h in scan.hits.items()
        },
    )


def test_a_large_file_scanned_in_place_gives_what_chunks_give(shipped_library: Library, tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    generate(log, 400_000, seed=7)
    with log.open("ab") as out:  # escape sequences force a read; a last line without a newline
        out.write(b"\x1b[31mRuntimeError: CUDA error: an illegal memory access was encountered\x1b[0m\nno newline")
    chunks = scan_file(shipped_library, iter_chunks(log, block=16384), name="a", index=0, threads=1)
    blocks = list(iter_blocks(log, block=16384, in_place_min=0))
    assert any(isinstance(b, Block) for b in blocks) and len(blocks) > 10
    for threads in (1, 2):
        in_place = scan_file(shipped_library, iter(blocks), name="a", index=0, threads=threads)
        assert _signature_of(in_place) == _signature_of(chunks)


def test_a_small_file_and_a_stream_are_read_as_chunks(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(b"a\nb\n")
    assert all(isinstance(c, Chunk) for c in iter_blocks(log))
    assert all(isinstance(c, Chunk) for c in iter_blocks(io.BytesIO(b"a\nb\n"), in_place_min=0))


def test_count_newlines_counts_in_place(tmp_path: Path) -> None:
    data = b"x\n" * 1000 + b"\r\n\n" + bytes(range(256))
    assert count_newlines(memoryview(data)) == data.count(b"\n")


def _scan_dense(lib: Library, data: bytes, *, block: int, threads: int) -> FileScan:
    return scan_file(lib, iter_chunks(io.BytesIO(data), block=block), name="a", index=0, threads=threads)


def test_a_match_dense_log_is_read_only_as_far_as_the_file_needs() -> None:
    lib = library(signature("t.nccl", ("version", r"NCCL version (?P<nccl_version>\d+\.\d+\.\d+)", 0.5)))
    (mine,) = [i for i, rules in enumerate(lib.rules) if any(r.signature == "t.nccl" for r in rules)]
    (builtin,) = [i for i in lib.kinds["version"] if "NCCL version" in lib.regexes[i]]
    total = 200_000
    data = b"NCCL version 2.21.5\n" * total
    seen, counts = [], {}
    for block, threads in ((1 << 16, 1), (1 << 16, 2), (1 << 18, 2), (1 << 20, 1), (1 << 16, 4)):
        scan = _scan_dense(lib, data, block=block, threads=threads)
        hits = scan.hits[mine]
        counts.setdefault(block, set()).add(hits.count)
        # The first lines and hits are kept, the last line is known, the rest is only counted.
        assert hits.saturated and hits.last_line == total
        assert hits.lines == list(range(1, KEEP_LINES + 1))
        assert [h.line.no for h in hits.first] == list(range(1, KEEP_FIRST + 1))
        assert hits.first[0].groups == {"nccl_version": "2.21.5"}
        assert KEEP_LINES < hits.count < total  # a lower bound once saturated
        # The work: one line past what the file keeps, however many chunks and threads.
        assert hits.located == KEEP_LINES + 1
        # The environment keeps the version's first lines, with the lines they are on; once the
        # file has enough of them, no more are read for it.
        env = scan.hits[builtin]
        assert env.first[0].groups["nccl"] == "2.21.5" and len(env.first) == KEEP_FIRST
        assert env.located == KEEP_FIRST + 1
        seen.append((hits.lines, hits.last_line, [h.line.no for h in hits.first], scan.hits[builtin].located))
    assert all(s == seen[0] for s in seen)
    # Probes run ahead in threads; what the chunks before them recorded decides, so the
    # count (a lower bound) is the same however the threads were timed.
    assert all(len(c) == 1 for c in counts.values())


def test_hits_past_a_probe_budget_are_located_when_the_file_still_needs_them() -> None:
    # `foo\rbar` is found by the chunk search but holds no frame that matches: such
    # lines use up a probe's budget without filling the file's lines.
    lib = library(signature("t.frames", ("p", r"foo.{0,5}bar", 0.5)))
    (idx,) = [i for i, rules in enumerate(lib.rules) if any(r.signature == "t.frames" for r in rules)]
    data = b"foo\rbar\n" * 100 + b"foobar\n" * 5000
    for threads in (1, 2):
        hits = _scan_dense(lib, data, block=1 << 20, threads=threads).hits[idx]
        assert hits.lines == list(range(101, 101 + KEEP_LINES))
        assert hits.saturated and hits.last_line == 5100


def lines_per_pattern(library: Library, data: bytes) -> dict[int, list[int]]:
    """Each pattern searched on each frame of each line on its own (no chunk, no Set narrowing)."""
    found: dict[int, list[int]] = {}
    for no, line in enumerate(data.split(b"\n"), 1):
        frames = line.split(b"\r")
        for idx in library.prefilter.Match(line) or ():
            if any(find(library.compiled[idx], frame) >= 0 for frame in frames):
                found.setdefault(idx, []).append(no)
    return found


def test_a_log_of_failure_lines_of_every_kind_is_located_line_for_line(shipped_library: Library) -> None:
    # The library's own examples (real excerpts), each line printed twice in a row as a
    # looping job does: hundreds of patterns hit in every chunk (located where the Set
    # narrows them to) and repeated lines are matched by comparison, not searched.
    lib = shipped_library
    unit = library_examples(lib)
    data = b"".join(line + b"\n" + line + b"\n" for line in unit.split(b"\n")[:-1])
    assert len(lib.prefilter.Match(data[: 1 << 16]) or ()) >= 4 * NARROW_FROM
    expected = lines_per_pattern(lib, data)
    # Patterns read only for a while (environment lines, generic errors) stop early by design.
    fully = set(range(len(lib.regexes))) - lib.kinds["version"] - lib.kinds["error"] - lib.kinds["progress"]
    raw = data.split(b"\n")
    for block, threads in ((1 << 16, 2), (1 << 20, 1)):
        scan = _scan_dense(lib, data, block=block, threads=threads)
        got = {idx: hits.lines for idx, hits in scan.hits.items() if idx in fully}
        assert got == {idx: lines[:KEEP_LINES] for idx, lines in expected.items() if idx in fully}
        # A count is exact until the pattern saturates, then a lower bound (`Hits.count`): a near
        # pattern as broad as 'Error' meets more lines than the cap in the examples alone.
        assert all(
            h.count == len(expected[i]) if not h.saturated else 0 < h.count <= len(expected[i])
            for i, h in scan.hits.items()
            if i in fully
        )
        # A line parsed once and renumbered is the line make_line gives for its number.
        first = [h.line for hits in scan.hits.values() for h in hits.first if b"\r" not in raw[h.line.no - 1]]
        assert len(first) > 1000
        assert all(line == make_line(raw[line.no - 1], line.no, file="a") for line in first)
