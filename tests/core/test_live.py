"""A growing log scanned as it grows (`app.core.engine.live`) gives what a whole-file diagnosis gives."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from app.core.engine.diagnose import diagnose_many
from app.core.engine.live import LiveJob, LiveScan
from app.core.engine.reader import BLOCK
from app.core.engine.rewrap import rewrap, unmark, untag
from app.core.knowledge.loading import Library

CASES = Path(__file__).resolve().parents[1] / "corpus" / "cases"


def _logs(case: Path) -> list[Path]:
    return sorted(p for p in case.iterdir() if p.name != "case.yaml")


def _fed_in_pieces(library: Library, logs: list[Path], seed: str, *, diagnose_between: bool = False) -> LiveJob:
    job = LiveJob(library)
    rnd = random.Random(seed)
    for path in logs:
        data, live, i = path.read_bytes(), job.file(path.name), 0
        while i < len(data):
            n = rnd.choice([1, 7, 50, 300, 4000])
            live.feed(data[i : i + n])
            i += n
            if diagnose_between and rnd.random() < 0.2:
                job.diagnose()  # snapshots must leave the running scan as it was
        live.flush()
    return job


def _pasted(logs: list[Path]) -> bool:
    """A log the whole-file reader reads as a paste (console wraps rejoined, markdown marks and a launcher's
    repeated tags dropped): a log followed as it grows is a program's own output, read as written."""
    return any(
        len(data := p.read_bytes()) <= BLOCK
        and (unmark(data) is not None or rewrap(data) is not None or untag(data) is not None)
        for p in logs
    )


def test_every_corpus_case_fed_in_random_pieces_gets_the_whole_file_diagnosis(library: Library) -> None:
    cases = sorted(p for p in CASES.iterdir() if p.is_dir())
    assert len(cases) > 800
    different = []
    pasted = [case.name for case in cases if _pasted(_logs(case))]
    assert len(pasted) < 0.03 * len(cases)  # a few real pastes: most logs are read as written either way
    for case in cases:
        if case.name in pasted:
            continue
        logs = _logs(case)
        whole = diagnose_many([(p.name, p.read_bytes()) for p in logs], library)
        live = _fed_in_pieces(library, logs, case.name).diagnose()
        if live is None or live.model_dump() != whole.model_dump():
            different.append(case.name)
    assert different == []


@pytest.mark.parametrize(
    "case", ["gen-dist-per-rank-hang-logged", "gen-dist-per-rank-index-error", "gh-modelscope-ms-swift-6301"]
)
def test_diagnosing_while_it_grows_does_not_disturb_the_scan(library: Library, case: str) -> None:
    logs = _logs(CASES / case)
    whole = diagnose_many([(p.name, p.read_bytes()) for p in logs], library)
    live = _fed_in_pieces(library, logs, case, diagnose_between=True).diagnose()
    assert live is not None
    assert live.model_dump() == whole.model_dump()


def test_a_partial_last_line_waits_for_its_newline(library: Library) -> None:
    scan = LiveScan(library, name="train.log")
    scan.feed(b"step 1\ntorch.OutOfMemoryError: CUDA out of ")
    assert scan.pending == len(b"torch.OutOfMemoryError: CUDA out of ")
    assert scan.snapshot().lines == 1
    scan.feed(b"memory. Tried to allocate 2.00 GiB\n")
    assert scan.pending == 0
    snap = scan.snapshot()
    assert snap.lines == 2
    assert any(h.first and h.first[0].line.no == 2 for h in snap.hits.values())


def test_a_blank_job_has_no_diagnosis_yet(library: Library) -> None:
    job = LiveJob(library)
    job.file("train.log").feed(b"\n   \n")
    assert job.diagnose() is None


def test_a_fork_scans_on_without_touching_the_original(library: Library) -> None:
    logs = _logs(CASES / "gen-dist-per-rank-index-error")
    rank2 = next(p for p in logs if p.name == "rank2.log").read_bytes()
    head, tail = rank2[: rank2.index(b"[rank2]: IndexError")], rank2[rank2.index(b"[rank2]: IndexError") :]
    original = LiveScan(library, name="rank2.log")
    original.feed(head)
    before = original.snapshot()
    fork = original.fork()
    fork.feed(tail)
    fork.flush()
    after = original.snapshot()
    assert (after.lines, after.bytes, sorted(after.hits)) == (before.lines, before.bytes, sorted(before.hits))
    assert fork.snapshot().lines == original.lines + tail.count(b"\n")
    job = LiveJob(library)
    job.files["rank2.log"] = fork
    forked = job.diagnose()
    whole = diagnose_many([("rank2.log", rank2)], library)
    assert forked is not None and forked.model_dump() == whole.model_dump()
