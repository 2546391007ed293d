"""Initiating vs collateral, lone timeouts, healthy logs, weak evidence, earlier trouble."""

from __future__ import annotations

from app.core import diagnose
from app.core.knowledge.loading import Library, build_library
from app.core.rendering.text import render_text
from tests.support import REPO

CORPUS = REPO / "tests" / "corpus" / "cases"

OOM_CASCADE = """\
[2024-06-14 10:00:00,000] INFO starting training, world size 8
{'loss': 2.1, 'learning_rate': 5e-05, 'epoch': 0.1}
[rank5]: Traceback (most recent call last):
[rank5]:   File "train.py", line 88, in train_step
[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 5 has a total capacity of 79.15 GiB
[rank0]:[E0614 10:10:00.000000 1234 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600050 milliseconds before timing out.
[rank1]:[E0614 10:10:00.000000 1235 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600050 milliseconds before timing out.
W0614 10:10:01.000000 999 torch/distributed/elastic/multiprocessing/api.py:890] Sending process 1236 closing signal SIGTERM
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-06-14_10:10:01
  host      : node1
  rank      : 5 (local_rank: 5)
  exitcode  : 1 (pid: 1240)
============================================================
"""


def ids_roles(text: str, library: Library) -> list[tuple[str, str]]:
    return [(c.id, c.role) for c in diagnose(text.encode(), library).candidates]


def test_oom_on_one_rank_initiates_and_the_rest_is_collateral(cascade_library: Library) -> None:
    d = diagnose(OOM_CASCADE.encode(), cascade_library)
    first = d.candidates[0]
    assert (first.id, first.role, first.rank, first.line) == ("cuda.oom", "initiating", 5, 5)
    assert first.facts["requested"] == "2.00 GiB"
    roles = {c.id: c for c in d.candidates}
    assert roles["nccl.watchdog_timeout"].role == "collateral"
    assert roles["nccl.watchdog_timeout"].caused_by == "cuda.oom"
    assert roles["nccl.watchdog_timeout"].ranks == [0, 1]
    assert roles["nccl.watchdog_timeout"].facts["op"] == "ALLREDUCE"
    assert roles["dist.child_failed"].role == "collateral"
    assert roles["dist.child_failed"].facts["root_rank"] == "5"
    assert roles["dist.sigterm_collateral"].role == "collateral"
    assert d.initiating is first


def test_the_launcher_summary_picks_the_rank_that_failed_first(cascade_library: Library) -> None:
    # Two OOMs; the launcher says rank 3 failed first although rank 5's line comes first.
    log = OOM_CASCADE.replace("rank      : 5", "rank      : 3") + (
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB.\n"
    )
    d = diagnose(log.encode(), cascade_library)
    assert d.candidates[0].id == "cuda.oom"
    assert "rank 3" in d.candidates[0].why


def test_a_lone_timeout_stays_the_root_cause(cascade_library: Library) -> None:
    log = "\n".join(OOM_CASCADE.splitlines()[5:7]) + "\n"
    assert ids_roles(log, cascade_library) == [("nccl.watchdog_timeout", "initiating")]


def test_a_timeout_before_the_oom_is_not_its_echo(cascade_library: Library) -> None:
    lines = OOM_CASCADE.splitlines()
    log = "\n".join([lines[5], lines[4]]) + "\n"
    assert ids_roles(log, cascade_library)[0] == ("nccl.watchdog_timeout", "initiating")


def test_a_healthy_log_gives_no_candidates(cascade_library: Library) -> None:
    log = "".join(f"{{'loss': {2 - i / 100:.3f}, 'epoch': {i / 100}}}\n" for i in range(100))
    log += "UserWarning: TypedStorage is deprecated\nNCCL INFO Channel 00/02 : 0 1 2 3\n"
    d = diagnose(log.encode(), cascade_library)
    assert d.candidates == []
    assert d.input.lines == 102


def test_bare_killed_is_only_possible_and_kernel_line_confirms(cascade_library: Library) -> None:
    d = diagnose(b"step 10 loss 1.0\nKilled\n", cascade_library)
    assert [(c.id, c.band) for c in d.candidates] == [("host.oom_killed", "possible")]
    d = diagnose(b"[12345.678] Out of memory: Killed process 4242 (python)\nKilled\n", cascade_library)
    assert (d.candidates[0].id, d.candidates[0].band, d.candidates[0].facts["pid"]) == (
        "host.oom_killed",
        "likely",
        "4242",
    )


def test_a_failure_the_run_survived_is_earlier_trouble(cascade_library: Library) -> None:
    log = "UnicodeDecodeError: 'utf-8' codec can't decode byte 0x80 in position 0\n"
    log += "".join(f"{{'loss': 1.0, 'epoch': {i}}}\n" for i in range(50))
    log += "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.\n"
    d = diagnose(log.encode(), cascade_library)
    assert [(c.id, c.role, c.episode) for c in d.candidates] == [
        ("cuda.oom", "initiating", "terminal"),
        ("data.decode", "contributing", "earlier"),
    ]


def test_a_launcher_report_alone_is_never_the_initiating_failure(cascade_library: Library) -> None:
    log = "\n".join(OOM_CASCADE.splitlines()[8:]) + "\n"
    d = diagnose(log.encode(), cascade_library)
    assert d.candidates and all(c.role == "collateral" for c in d.candidates)
    assert d.initiating is None
    assert "INITIATING: not recognised" in render_text(d)


def test_an_echoes_only_log_names_the_unrecognised_start(library: Library) -> None:
    """A real DeepSpeed report: ZeRO-3's no_sync assertion, then the launcher's SIGTERM and ChildFailedError."""
    case = CORPUS / "gh-deepspeedai-deepspeed-6793" / "log.txt"
    unknowing = build_library(s for s in library.signatures.values() if s.id != "deepspeed.zero_no_sync")
    d = diagnose(case.read_bytes(), unknowing)
    assert d.initiating is None and {c.role for c in d.candidates} == {"collateral"}
    start = d.unrecognised_start
    assert start is not None and start.text.startswith("AssertionError: no_sync context manager is incompatible")
    assert start.line < min(c.line for c in d.candidates)


def test_unexplained_error_lines_are_deduplicated(cascade_library: Library) -> None:
    log = "ValueError: bad value 12\nValueError: bad value 13\nKeyError: 'x'\n"
    log += "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.\n"
    d = diagnose(log.encode(), cascade_library)
    assert [(u.text, u.count, u.line) for u in d.unexplained] == [
        ("ValueError: bad value 12", 2, 1),
        ("KeyError: 'x'", 1, 3),
    ]


def test_a_logger_s_error_level_alone_is_no_unexplained_line(shipped_library: Library) -> None:
    """vLLM logs a traceback at ERROR, blank lines included (vllm-project/vllm#23176): those say nothing."""
    case = REPO / "tests" / "corpus" / "cases" / "gh-vllm-project-vllm-23176-enginecore"
    d = diagnose((case / "log.txt").read_bytes(), shipped_library)
    texts = [u.text for u in d.unexplained]
    assert "The above exception was the direct cause of the following exception:" in texts
    assert all(text.strip() for text in texts)
    assert not any(text.startswith("(EngineCore_0") for text in texts)  # shown without the prefix


def test_multiple_files_are_ordered_by_time(cascade_library: Library) -> None:
    from app.core import diagnose_many

    rank0 = b"2024-06-14T10:10:00 [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=BROADCAST\n"
    rank5 = b"2024-06-14T10:00:00 torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.\n"
    d = diagnose_many([("rank0.log", rank0), ("rank5.log", rank5)], cascade_library)
    assert [(c.id, c.role, c.file) for c in d.candidates] == [
        ("cuda.oom", "initiating", "rank5.log"),
        ("nccl.watchdog_timeout", "collateral", "rank0.log"),
    ]
    assert d.input.files == ["rank0.log", "rank5.log"]


def test_an_unrecognised_start_offers_entries_worded_like_it(library: Library) -> None:
    """Similar entries are leads for a line nothing recognised: from the library, never candidates."""
    case = CORPUS / "gh-deepspeedai-deepspeed-6793" / "log.txt"
    unknowing = build_library(s for s in library.signatures.values() if s.id != "deepspeed.zero_no_sync")
    d = diagnose(case.read_bytes(), unknowing)
    similar = d.unrecognised_start.similar if d.unrecognised_start else []
    # The line's ZeRO-stage wording is DeepSpeed's own; other entries that share a word or two
    # ("context manager", "stage") may rank beside it, so it is among the leads, not always first.
    assert "deepspeed.config_error" in [s.id for s in similar]
    assert {s.id for s in similar} <= set(unknowing.signatures)
    assert not {s.id for s in similar} & {c.id for c in d.candidates}
    shown = next(
        line for line in render_text(d).splitlines() if "similar entries (worded like it, not matched): " in line
    )
    assert "deepspeed.config_error" in shown


def test_a_line_that_shares_no_telling_word_suggests_nothing(library: Library) -> None:
    assert library.similar.nearest("Traceback (most recent call last): see above, error 12 at 0x7f3a") == []


def test_an_emitted_message_may_be_indented_but_not_quoted() -> None:
    """A paste often indents a line; a quote of the message in code or prose is not the tool printing it."""
    from app.core.engine.diagnose import diagnose

    from .conftest import library, signature

    lib = library(
        signature("proc.segfault", ("shell", r"Segmentation fault(?: \(core dumped\))?$", 0.85), source="emitted")
    )
    assert [c.id for c in diagnose(b"   Segmentation fault (core dumped)\n", lib).candidates] == ["proc.segfault"]
    assert diagnose(b'    print("boom: Segmentation fault")\n', lib).candidates == []


def test_a_log_with_nothing_recognised_names_its_first_exception(library: Library) -> None:
    """A real whisper paste (jarodmica/beatrice-trainer-webui#1) read by a library without its class."""
    case = CORPUS / "gh-jarodmica-beatrice-trainer-webui-1" / "log.txt"
    unknowing = build_library(s for s in library.signatures.values() if s.id != "data.audio_decode_failed")
    d = diagnose(case.read_bytes(), unknowing)
    assert d.candidates == []
    start = d.unrecognised_start
    assert start is not None and start.text == "RuntimeError: Failed to load audio:"
    assert start.why == "nothing in the log is recognised; this is the first exception it raised"
    assert start.similar and start.similar[0].id == "env.media_tool_missing"  # a lead, not a candidate
    text = render_text(d)
    assert text.startswith("No known failure found")
    assert "NOT RECOGNISED: no signature explains the log's error" in text
    assert "  first error, line 6:\n    RuntimeError: Failed to load audio:" in text


def test_the_first_exception_is_named_not_the_one_raised_while_handling_it(cascade_library: Library) -> None:
    log = (
        "starting\n"
        "WARNING: ERROR-level noise before the traceback\n"
        "Traceback (most recent call last):\n"
        "FrobError: the widget could not be frobbed\n"
        "\nDuring handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n"
        "ReportError: could not report the frob failure\n"
    )
    d = diagnose(log.encode(), cascade_library)
    assert d.candidates == []
    assert d.unrecognised_start is not None and d.unrecognised_start.line == 4


def test_a_run_that_finished_has_no_unrecognised_start(library: Library) -> None:
    """A healthy run may log an error it survived: the report stays 'looks healthy'."""
    log = (
        "ValueError: could not parse optional config field, using the default\n"
        "{'loss': 0.91, 'learning_rate': 5e-05, 'epoch': 1.0}\n"
        "{'train_runtime': 12.5, 'train_samples_per_second': 40.1, 'train_loss': 0.95, 'epoch': 1.0}\n"
    )
    d = diagnose(log.encode(), library)
    assert d.candidates == []
    assert d.ending is not None and d.ending.state == "completed"
    assert d.unrecognised_start is None
    assert render_text(d).startswith("Looks healthy")
