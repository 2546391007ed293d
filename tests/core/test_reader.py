"""The reader never raises on bad bytes, keeps memory bounded and numbers lines consistently."""

from __future__ import annotations

import io

from app.core.engine.reader import LINE_CAP, iter_chunks, read_lines


def texts(data: bytes) -> list[tuple[int, str]]:
    return [(line.no, line.text) for line in read_lines(data)]


def test_invalid_utf8_is_replaced_not_raised() -> None:
    assert texts(b"ok \xff\xfe \xc0\xaf \xed\xa0\x80 end\n") == [
        (1, "ok \ufffd\ufffd \ufffd\ufffd \ufffd\ufffd\ufffd end")
    ]


def test_nul_bytes_are_removed() -> None:
    assert texts(b"a\x00b\nc\n") == [(1, "ab"), (2, "c")]


def test_ansi_escapes_are_stripped() -> None:
    data = b"\x1b[31mRuntimeError\x1b[0m: boom\n\x1b]8;;https://x.org\x07link\x1b]8;;\x07\n\x1b]0;title\x07done\n"
    assert texts(data) == [(1, "RuntimeError: boom"), (2, "link"), (3, "done")]


def test_carriage_return_frames_split_and_progress_collapses() -> None:
    data = b" 10%|#         | 1/10 [00:01<00:09]\r 20%|##        | 2/10 [00:02<00:08]\rTraceback (most recent call last):\nnext\n"
    assert texts(data) == [(1, "Traceback (most recent call last):"), (2, "next")]


def test_crlf_folds_and_numbers_stay_physical() -> None:
    assert texts(b"a\r\nb\r\n\r\nc") == [(1, "a"), (2, "b"), (4, "c")]


def test_empty_and_blank_input() -> None:
    assert texts(b"") == []
    assert texts(b"\n\n  \n") == []


def test_a_10_mb_line_is_capped_and_counted() -> None:
    data = b"x" * (10 << 20) + b"\nafter\n"
    lines = list(read_lines(data))
    assert [(line.no, len(line.text)) for line in lines] == [(1, LINE_CAP), (2, 5)]
    assert lines[0].cut > 0


def test_chunks_end_on_line_breaks_and_keep_numbering() -> None:
    data = b"".join(b"line %d\n" % i for i in range(1, 10_001))
    chunks = list(iter_chunks(io.BytesIO(data), block=4096))
    assert len(chunks) > 10
    assert all(c.data.endswith(b"\n") for c in chunks)
    assert [c.first_line for c in chunks[:2]] == [1, 1 + chunks[0].newlines]
    assert b"".join(c.data for c in chunks) == data
    assert [line.no for line in read_lines(io.BytesIO(data))][-1] == 10_000


def test_paths_and_streams_read_the_same(tmp_path) -> None:
    path = tmp_path / "train.log"
    path.write_bytes(b"one\ntwo\n")
    assert [line.file for line in read_lines(path)] == [str(path)] * 2
    assert texts(path.read_bytes()) == [(1, "one"), (2, "two")]


def test_prefixed_lines_carry_rank_and_time() -> None:
    (line,) = read_lines(b"[rank3]: [2024-06-14 10:12:33,456] ERROR boom\n")
    assert (line.rank, line.time.isoformat(), line.text[line.content_start :]) == (
        3,
        "2024-06-14T10:12:33.456000",
        "ERROR boom",
    )


def _tricky(seed: int) -> bytes:
    """Lines of every length around the block and carry sizes, frames, escapes, no final newline."""
    import random

    rng = random.Random(seed)
    pieces = []
    for _ in range(300):
        kind = rng.random()
        if kind < 0.6:
            pieces.append(b"step %d loss %.3f\n" % (rng.randrange(10**6), rng.random()))
        elif kind < 0.75:
            pieces.append(b" 5%|#  | 1/20 [00:01]\r" * rng.randrange(1, 40) + b"Killed\n")
        elif kind < 0.85:
            pieces.append(b"\x1b[31mRuntimeError\x1b[0m: " + b"y" * rng.randrange(1, 50_000) + b"\n")
        elif kind < 0.95:
            pieces.append(b"\r\n" * rng.randrange(1, 3))
        else:
            pieces.append(b"z" * rng.randrange(20_000, 90_000) + b"\x1b[0m\n")  # longer than the carry
    return b"".join(pieces) + b"last line without newline"


def test_a_mapped_file_reads_as_the_same_stream(tmp_path, monkeypatch) -> None:
    import app.core.engine.reader as reader

    monkeypatch.setattr(reader, "MAX_CARRY", 16_384)  # cut long lines often, as a 1 MiB one would be
    for seed in range(3):
        data = _tricky(seed)
        path = tmp_path / f"log{seed}"
        path.write_bytes(data)
        for block in (4096, 65_536):
            mapped = list(iter_chunks(path, block=block))
            streamed = list(iter_chunks(io.BytesIO(data), block=block))
            assert sum(len(c.data) for c in mapped) == sum(len(c.data) for c in streamed)
            assert mapped[-1].first_line + mapped[-1].newlines == streamed[-1].first_line + streamed[-1].newlines
            assert all(len(c.data) <= block + 16_384 + block for c in mapped)
            assert [(x.no, x.text) for x in read_lines(path)] == [(x.no, x.text) for x in read_lines(data)]


def test_an_empty_file_has_no_chunks(tmp_path) -> None:
    path = tmp_path / "empty.log"
    path.write_bytes(b"")
    assert list(iter_chunks(path)) == []


def test_an_open_file_is_read_from_its_position_and_left_consumed(tmp_path) -> None:
    path = tmp_path / "train.log"
    path.write_bytes(b"header\none\ntwo\n")
    with open(path, "rb") as stream:
        stream.readline()
        chunks = list(iter_chunks(stream))
        assert b"".join(c.data for c in chunks) == b"one\ntwo\n"
        assert stream.read() == b""


def test_a_pipe_is_read_not_mapped() -> None:
    import os

    read_end, write_end = os.pipe()
    os.write(write_end, b"a\nb\n")
    os.close(write_end)
    with os.fdopen(read_end, "rb") as stream:
        assert [(line.no, line.text) for line in read_lines(stream)] == [(1, "a"), (2, "b")]
