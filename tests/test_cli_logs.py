"""How the CLI opens logs (app/cli/logs.py): a file is handed to the engine itself, so it is
mapped, not read through copies; a pipe or gzip is read as a stream; progress is told by the
engine as it scans, and by the reads in remote mode."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
from pathlib import Path

import pytest

from app.cli.logs import PROGRESS_FROM, ProgressLine, open_log
from app.core.engine.diagnose import scan_sources
from app.core.engine.reader import Block, iter_blocks
from app.core.knowledge.loading import load_library
from app.errors import NotText
from tests.support import SIGNATURES

LINE = b"{'loss': 1.25, 'learning_rate': 5e-05, 'epoch': 0.5}\n"


def test_a_file_is_handed_back_itself_from_where_it_was(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(b"header\n" + LINE * 100)
    with log.open("rb") as f:
        assert open_log(f) is f and f.tell() == 0  # rewound after its first bytes were judged
    with log.open("rb") as f:
        f.readline()  # standard input from a file may start past its beginning
        assert open_log(f) is f and f.read() == LINE * 100


def test_a_large_file_opened_by_the_cli_is_scanned_in_place(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    log.write_bytes(LINE * ((2 << 20) // len(LINE)))
    with log.open("rb") as f:
        pieces = list(iter_blocks(open_log(f), in_place_min=1 << 20))
    assert pieces and all(isinstance(p, Block) for p in pieces)  # mapped, not read through a copy


def test_a_pipe_and_gzip_are_read_as_streams_with_their_first_bytes(tmp_path: Path) -> None:
    data = LINE * 1000
    r, w = os.pipe()
    writer = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=w)
    os.close(w)
    assert writer.stdin is not None
    writer.stdin.write(data)
    writer.stdin.close()
    with os.fdopen(r, "rb") as pipe:
        opened = open_log(pipe)
        assert opened is not pipe and opened.read() == data
    writer.wait(10)
    packed = tmp_path / "train.log.x"
    packed.write_bytes(gzip.compress(data))
    with packed.open("rb") as f:
        opened = open_log(f)
        assert opened is not f and opened.read() == data  # gunzipped by its magic bytes


def test_binary_data_is_refused_whether_mapped_or_streamed(tmp_path: Path) -> None:
    blob = tmp_path / "model.bin"
    blob.write_bytes(bytes(range(256)) * 64)
    with blob.open("rb") as f, pytest.raises(NotText):
        open_log(f)
    with pytest.raises(NotText):
        open_log(io.BufferedReader(io.BytesIO(bytes(range(256)) * 64)))


def test_the_engine_tells_the_bytes_it_scanned_as_they_grow(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(LINE * ((3 << 20) // len(LINE)))  # three chunks
    told: list[tuple[str | None, int]] = []
    scan_sources([("train.log", log)], load_library(SIGNATURES), progress=lambda name, done: told.append((name, done)))
    assert {name for name, _ in told} == {"train.log"}
    counts = [done for _, done in told]
    assert len(counts) >= 3 and counts == sorted(counts) and counts[-1] == log.stat().st_size


def test_the_progress_line_says_nothing_below_its_size_nor_off_a_terminal() -> None:
    out = io.StringIO()
    line = ProgressLine(out)
    line("train.log", PROGRESS_FROM - 1)
    assert out.getvalue() == ""
    blocks = list(line.reading("train.log", [b"x" * PROGRESS_FROM, b"y"]))
    assert blocks == [b"x" * PROGRESS_FROM, b"y"]
    assert out.getvalue().startswith("\r\x1b[Kreading train.log: 16.0 MB (")
    line.clear()
    assert out.getvalue().endswith("\r\x1b[K") and not line.shown
    silent = ProgressLine(None)
    silent("train.log", 10 * PROGRESS_FROM)
    silent.clear()
    assert not silent.shown
