"""What is kept of a log: the whole log, redacted and compressed, reads as the text a person saw."""

from __future__ import annotations

import gzip
import io
import random

import pytest

from app.core.keep import REDACTION_FLOOR, REDACTION_PER_MIB, compress_redacted, keep
from app.core.knowledge.loading import Library
from app.core.redaction.redactor import Budget, Redactor
from app.errors import OverBudget

# Colour, a window title and a hyperlink, as a terminal logger prints them around an error.
COLOURED = (
    b"\x1b[31mtorch.OutOfMemoryError\x1b[0m: CUDA out of memory.\n"
    b"\x1b]0;train.py\x07step 10 loss 2.31\n"
    b"see \x1b]8;;https://pytorch.org/docs\x07the docs\x1b]8;;\x07 token=hf_abcdefghijklmnopqrstuvwxyzABCDEFGH\n"
    b"stray \x1b escape\n"
)


def test_the_kept_log_has_no_escape_sequences_left() -> None:
    kept, counts = compress_redacted([(None, io.BytesIO(COLOURED))], Redactor())
    assert kept is not None
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
    assert kept is not None
    assert gzip.decompress(kept).decode() == "==> rank0.log <==\nstep 1\n==> rank1.log <==\nstep 1\n"


def _dense(lines: int) -> bytes:
    """A log of distinct addresses, two a line (issue #38: 100x the CPU of an ordinary log when kept)."""
    rng = random.Random(38)
    return "".join(
        f"10.1.{rng.randrange(256)}.{rng.randrange(256)} 10.2.0.{rng.randrange(256)}\n" for _ in range(lines)
    ).encode()


def test_a_log_dense_in_secrets_is_not_kept_whole_but_is_diagnosed(library: Library) -> None:
    data = _dense(200_000) + b"[rank0]: torch.OutOfMemoryError: CUDA out of memory.\n"
    kept = keep([("train.log", io.BytesIO(data))], library, top=None, context=3, keep_log=True)
    assert kept.log_gz is None and not kept.has_log  # over the redaction budget
    assert kept.candidates[0].id == "cuda.oom"
    window = [line.text for w in kept.windows for line in w.lines]
    assert window and all("10.1." not in text and "10.2." not in text for text in window)
    assert kept.redactions["ipv4"] >= 6  # the windows' own, counted


def test_the_budget_bounds_the_work_not_the_size() -> None:
    # An ordinary log of the same size as one that is refused is kept: what counts is the secret-like tokens.
    quiet = b"[rank3]: step 1234 | loss 0.913 | lr 3.0e-04 | tokens/s 5321.2\n" * 60_000
    kept, _ = compress_redacted([(None, io.BytesIO(quiet))], Redactor())
    assert kept is not None
    dense, counts = compress_redacted([(None, io.BytesIO(_dense(200_000)))], Redactor())
    assert dense is None and counts == {}
    # A few secrets a line in a small log stay well within the floor.
    few, counts = compress_redacted([(None, io.BytesIO(_dense(1000)))], Redactor())
    assert few is not None and counts == {"ipv4": 2000}


def test_a_budget_raises_once_spent() -> None:
    budget = Budget(2)
    budget.spend()
    budget.spend()
    budget.grant(1)
    budget.spend()
    with pytest.raises(OverBudget):
        budget.spend()
    assert REDACTION_FLOOR > 0 and REDACTION_PER_MIB > 0
