"""A job of several files gives the same diagnosis whatever the order of its files."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path
from typing import Any

import pytest

from app.core.engine.diagnose import diagnose_many, scan_sources
from app.core.engine.job import file_rank, rank_from_name
from app.core.knowledge.loading import Library
from app.evaluation.corpus import Case, load_case
from app.evaluation.evaluate import UNRANKED_FILE, rank_files, shuffled_orders

CASES = Path(__file__).resolve().parents[1] / "corpus" / "cases"
# The corpus's jobs logged one file per rank (torchrun --log-dir, two-node launches).
PER_RANK = sorted(p.parent.name for p in CASES.glob("*/rank1.log"))
# Real single-file multi-rank logs, split per rank by their prefixes: one whose answer used to
# follow the first file given (gloo timeouts on every rank, no times), and upstream NCCL
# watchdog pastes whose ranks time out at once.
SPLIT = ["gen-dist-hang-rank3-of-4", "gen-dist-index-error-4ranks", "gh-hiyouga-llamafactory-6269"]


def _dump(files: list[tuple[str, Any]], library: Library) -> dict[str, Any]:
    return diagnose_many(files, library, threads=1).model_dump(mode="json")


def test_the_corpus_has_per_rank_jobs() -> None:
    assert len(PER_RANK) >= 5


@pytest.mark.parametrize("case_id", PER_RANK)
def test_every_order_of_a_per_rank_job_gives_the_same_diagnosis(case_id: str, shipped_library: Library) -> None:
    files = [(p.name, p) for p in sorted((CASES / case_id).glob("*.log"))]
    first = _dump(files, shipped_library)
    for order in itertools.permutations(files):
        assert _dump(list(order), shipped_library) == first, [name for name, _ in order]


@pytest.mark.parametrize("case_id", SPLIT)
def test_every_order_of_a_multi_rank_log_split_per_rank_gives_the_same_diagnosis(
    case_id: str, shipped_library: Library
) -> None:
    files = rank_files(load_case(CASES / case_id).read())
    assert files is not None and len(files) >= 3
    first = _dump(files, shipped_library)
    assert first["candidates"], "the split job is still diagnosed"
    for order in itertools.permutations(files):
        assert _dump(list(order), shipped_library) == first, [name for name, _ in order]


def test_the_lowest_rank_breaks_a_tie_that_times_cannot(shipped_library: Library) -> None:
    # Every rank times out in gloo at once and no line has a time: the answer names rank 0's
    # file, not whichever file came first.
    files = rank_files(load_case(CASES / "gen-dist-hang-rank3-of-4").read())
    assert files is not None
    d = diagnose_many(files[::-1], shipped_library)
    assert d.candidates[0].id == "dist.gloo_timeout" and (d.candidates[0].file, d.candidates[0].rank) == (
        "rank0.log",
        0,
    )
    assert d.input.files == [name for name, _ in files]  # shown in the job's order, not the arguments'


def test_each_file_keeps_its_own_line_numbers(shipped_library: Library) -> None:
    case = CASES / "gen-dist-per-rank-index-error"
    d = diagnose_many([(p.name, p) for p in sorted(case.glob("*.log"), reverse=True)], shipped_library)
    initiating = d.initiating
    assert initiating is not None and (initiating.file, initiating.rank) == ("rank2.log", 2)
    text = (case / "rank2.log").read_text().splitlines()
    assert all(text[e.line - 1] == e.text for e in initiating.evidence if e.file == "rank2.log")


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("rank3.log", 3),
        ("logs/worker-3.log", 3),
        ("node1-rank3.out", 3),
        ("train-3.err", 3),
        ("rank_3.txt", 3),
        ("RANK12.log", 12),
        ("node1.log", None),
        ("train.log", None),
        (None, None),
    ],
)
def test_a_file_name_declares_a_rank(name: str | None, rank: int | None) -> None:
    assert rank_from_name(name) == rank


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("rank3.log", 3),  # a rank by name is one, alone or not
        ("train-3.err", None),  # alone, a trailing number is as often a run or an issue
        ("run-2.log", None),
    ],
)
def test_a_lone_file_s_trailing_number_is_no_rank(name: str, rank: int | None) -> None:
    assert rank_from_name(name, of_several=False) == rank


@pytest.mark.parametrize("name", ["slurm-4242137.out", "logs/slurm-424213.out", "slurm-4242_3.out", "slurm-77.err"])
def test_slurm_s_default_output_file_is_named_for_the_job_not_a_rank(name: str) -> None:
    assert rank_from_name(name) is None


def test_a_lone_file_named_with_a_number_shows_no_rank(shipped_library: Library) -> None:
    log = b"step 1\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    d = diagnose_many([("slurm-424213.out", log)], shipped_library)
    assert d.initiating is not None and d.initiating.rank is None
    d = diagnose_many([("issue-244.log", log)], shipped_library)
    assert d.initiating is not None and d.initiating.rank is None
    d = diagnose_many([("worker-3.log", log), ("worker-1.log", b"step 1\n")], shipped_library)
    assert d.initiating is not None and d.initiating.rank == 3


def test_a_file_without_rank_prefixes_takes_its_rank_from_its_name(shipped_library: Library, tmp_path: Path) -> None:
    # rank0.log of this job has no "[rank0]:" prefix; rank1.log has.
    case = CASES / "gen-dist-per-rank-hang"
    renamed = tmp_path / "node1-worker-5.out"
    shutil.copyfile(case / "rank0.log", renamed)
    scans = scan_sources([("node1-worker-5.out", renamed), ("x.log", case / "rank1.log")], shipped_library)
    # Both files hold one rank each: by name, and by the only rank its prefixes show.
    assert [file_rank(s) for s in scans] == [(5, True), (1, True)]


def test_shuffled_orders_are_deterministic_and_cover_reversal() -> None:
    orders = shuffled_orders("some-case", 5)
    assert orders == shuffled_orders("some-case", 5)
    assert orders[0] == [0, 1, 2, 3, 4] and orders[1] == [4, 3, 2, 1, 0] and len(orders) == 4


def test_a_split_log_keeps_the_launcher_lines_apart() -> None:
    case: Case = load_case(CASES / "gen-dist-hang-rank3-of-4")
    files = rank_files(case.read())
    assert files is not None
    names = [name for name, _ in files]
    assert names[-1] == UNRANKED_FILE and names[:-1] == [f"rank{r}.log" for r in range(len(names) - 1)]
    assert sum(len(data) for _, data in files) == case.logs[0].stat().st_size


@pytest.mark.parametrize("case_id", ["gen-mem-oom-killed-torchrun-rank", "gen-dist-sigkill-rank1"])
def test_a_merged_logs_unprefixed_launcher_line_keeps_the_rank_it_states(case_id: str, library: Library) -> None:
    # Rank 1 is SIGKILLed; only rank 0 prints a traceback, prefixed "[rank0]:", above torchrun's
    # own unprefixed "failed (exitcode: -9) local_rank: 1" and its Root Cause block naming rank 1.
    # The launcher's line must not take rank 0 from the prefixed lines above it.
    case = load_case(CASES / case_id)
    d = diagnose_many([(p.name, p) for p in case.logs], library, threads=1)
    first = d.candidates[0]
    assert (first.id, first.role, first.rank, first.facts["rank"]) == ("host.oom_killed", "initiating", 1, "1")
    assert "the launcher names rank 1 as the first failure" in first.why
    launcher = next(c for c in d.candidates if c.id == "dist.child_failed")
    assert launcher.evidence[0].rank is None and "local_rank: 1" in launcher.evidence[0].text


def test_a_file_named_for_a_rank_lends_it_to_unprefixed_lines(library: Library) -> None:
    log = (
        b"[rank3]: step 10 loss 2.0\nTraceback (most recent call last):\ntorch.OutOfMemoryError: CUDA out of memory.\n"
    )
    d = diagnose_many([("rank3.log", log)], library, threads=1)
    assert d.candidates[0].rank == 3
    d = diagnose_many([("train.log", log)], library, threads=1)
    assert d.candidates[0].rank is None
