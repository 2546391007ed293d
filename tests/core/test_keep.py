"""What is kept of a log: the whole log, redacted and compressed, reads as the text a person saw."""

from __future__ import annotations

import gzip
import io

from app.core.keep import compress_redacted
from app.core.redaction.redactor import Redactor

# Colour, a window title and a hyperlink, as a terminal logger prints them around an error.
COLOURED = (
    b"\x1b[31mtorch.OutOfMemoryError\x1b[0m: CUDA out of memory.\n"
    b"\x1b]0;train.py\x07step 10 loss 2.31\n"
    b"see \x1b]8;;https://pytorch.org/docs\x07the docs\x1b]8;;\x07 token=hf_abcdefghijklmnopqrstuvwxyzABCDEFGH\n"
    b"stray \x1b escape\n"
)


def test_the_kept_log_has_no_escape_sequences_left() -> None:
    kept, counts = compress_redacted([(None, io.BytesIO(COLOURED))], Redactor())
    text = gzip.decompress(kept).decode()
    assert text.splitlines() == [
        "torch.OutOfMemoryError: CUDA out of memory.",
        "step 10 loss 2.31",
        "see the docs token=[REDACTED:huggingface-token]",
        "stray  escape",
    ], text
    assert counts == {"huggingface-token": 1}


def test_several_logs_are_kept_one_after_the_other_under_their_names() -> None:
    logs = [("rank0.log", io.BytesIO(b"\x1b[1mstep 1\x1b[0m\n")), ("rank1.log", io.BytesIO(b"step 1\n"))]
    kept, _ = compress_redacted(logs, Redactor())
    assert gzip.decompress(kept).decode() == "==> rank0.log <==\nstep 1\n==> rank1.log <==\nstep 1\n"
