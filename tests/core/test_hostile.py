"""Hostile input: arbitrary bytes through the reader, the redactor and the matcher never raise,
and no signature pattern can be made to backtrack (the lint's adversarial lines, on both engines)."""

from __future__ import annotations

import io
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core import diagnose
from app.core.authoring.lint import _adversarial, _each_pattern, check_backtracking
from app.core.engine.reader import iter_chunks, read_lines
from app.core.knowledge.loading import Library, compile_re2, compile_text, load_signatures, pattern_problem
from app.core.redaction.redactor import DEFAULT
from app.errors import EmptyLog
from tests.support import SIGNATURES

LOADED, _ = load_signatures(SIGNATURES)
# Catastrophic backtracking costs minutes; the linear engine costs milliseconds. The budget
# only tells the two apart on a loaded two-core machine: it is not a speed test.
CATASTROPHE = 5.0

# Pieces logs are made of, and pieces that break naive readers.
PIECES = [
    b"\n", b"\r", b"\r\n", b"\x00", b"\x1b[31m", b"\x1b]8;;http://x\x07", b"\x1b", b"\xff\xfe", b"\xc0\xaf",
    b"\xed\xa0\x80", b"[rank3]: ", b"Traceback (most recent call last):\n", b"RuntimeError: CUDA error\n",
    b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", b" 45%|####  | 9/20 [00:01<00:02, 3.2it/s]",
    b"-----BEGIN PRIVATE KEY-----\n", b"password=", b"AKIA", b"eyJa.", b"://a:b@", b"a" * 300, b"\t", b"\xe2\x80\xa8",
]  # fmt: skip
hostile_bytes = st.one_of(
    st.binary(max_size=4096),
    st.lists(st.one_of(st.sampled_from(PIECES), st.binary(max_size=64)), max_size=80).map(b"".join),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_bytes)
def test_the_reader_takes_any_bytes(data: bytes) -> None:
    lines = list(read_lines(data))
    numbers = [line.no for line in lines]
    assert numbers == sorted(numbers)
    assert all("\x00" not in line.text and "\x1b" not in line.text and "\n" not in line.text for line in lines)
    assert sum(len(c.data) for c in iter_chunks(io.BytesIO(data), block=7)) <= len(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_bytes)
def test_the_redactor_takes_any_decoded_bytes(data: bytes) -> None:
    text = data.decode("utf-8", errors="replace")
    done = DEFAULT.text(text)
    assert done.text.count("\n") == text.count("\n")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_bytes)
def test_the_matcher_takes_any_bytes(library: Library, data: bytes) -> None:
    try:
        diagnosis = diagnose(data, library)
    except EmptyLog:
        return
    diagnosis.model_dump_json()
    assert diagnosis.input.bytes <= len(data)


PATTERNS = [
    (sig.id, name, pattern)
    for _, sig in LOADED
    for name, pattern in _each_pattern(sig)
    if pattern_problem(pattern) is None
]


def test_every_signature_pattern_is_linear_on_its_adversarial_lines() -> None:
    """The lint's hostile lines (long runs of what each pattern repeats), on the production engine
    over bytes and over decoded lines; the backtracking engine is checked by the lint itself."""
    cases = 0
    for sig_id, name, pattern in PATTERNS:
        scan, text = compile_re2(pattern), compile_text(pattern)
        for bait in _adversarial(pattern):
            started = time.perf_counter()
            scan.search(bait.encode())
            text.search(bait)
            assert time.perf_counter() - started < CATASTROPHE, f"{sig_id} {name} on {bait[:16]!r}"
            cases += 1
    assert cases > 1000
    print(f"{cases} adversarial lines over {len(PATTERNS)} patterns")


def test_the_lint_rejects_a_catastrophic_pattern() -> None:
    """check_backtracking catches the classic nested-quantifier pattern (the signatures' own are clean)."""
    sig = LOADED[0][1]
    evil = sig.model_copy(
        update={"fingerprints": (sig.fingerprints[0].model_copy(update={"regex": r"^(a+)+$", "near": ()}),)}
    )
    issues = list(check_backtracking(evil, Path("evil.yaml")))
    assert issues and "catastrophic backtracking" in issues[0].message


def test_a_megabyte_of_bait_through_the_whole_library(library: Library) -> None:
    """One hostile megabyte per fragment through the whole matcher (all patterns at once)."""
    for fragment in [b"a-", b"1.", b"a:", b"/a", b" ", b"Error: ", b"[rank0]: ", b"\\x", b"NCCL "]:
        data = (fragment * (1_000_000 // len(fragment)))[:1_000_000] + b"\n"
        started = time.perf_counter()
        try:
            diagnose(data, library)
        except EmptyLog:
            pass
        assert time.perf_counter() - started < CATASTROPHE * 4, fragment
