"""The rank a failure started on, from the lines that state it (real corpus logs)."""

from __future__ import annotations

from pathlib import Path

from app.core.engine.diagnose import diagnose_many
from app.core.knowledge.loading import Library
from app.core.models import Candidate
from app.evaluation.corpus import load_case

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "cases"


def first(case: str, library: Library, *, before: bytes = b"") -> Candidate:
    logs = load_case(CORPUS / case).read()
    name, text = logs[0]
    d = diagnose_many([(name, before + text), *logs[1:]], library, threads=1)
    return d.candidates[0]


def test_horovodrun_s_rank_prefix_names_the_rank(shipped_library: Library) -> None:
    """horovodrun (Gloo) prints "[1]<stderr>:": rank 1 segfaults, ranks 0 and 2 lose their peer."""
    d = diagnose_many(load_case(CORPUS / "gh-horovod-horovod-2835").read(), shipped_library, threads=1)
    segfault, echo = d.candidates[0], d.candidates[1]
    assert (segfault.id, segfault.role, segfault.rank) == ("proc.segfault", "initiating", 1)
    assert (echo.id, echo.role, echo.ranks) == ("dist.gloo_connection_closed", "collateral", [0, 2])
    assert first("gh-horovod-horovod-4048", shipped_library).rank == 3  # "[3]<stdout>:# SIGSEGV (0xb) ..."


def test_a_message_that_names_its_rank_gives_the_rank(shipped_library: Library) -> None:
    """Megatron's "AssertionError: Rank 3: found NaN in local grad norm ...", with no launcher prefix."""
    nan = first("gh-alibaba-pai-megatron-patch-60", shipped_library)
    assert (nan.id, nan.rank) == ("loss.nan", 3)


def test_torchrun_s_failed_local_rank_is_the_rank_on_one_node(shipped_library: Library) -> None:
    """torchrun's "failed (exitcode: -9) local_rank: 4": the SIGKILLed worker, whose own lines print nothing."""
    killed = first("gh-dachengli1-longchat-9", shipped_library)
    assert (killed.id, killed.role, killed.rank) == ("host.oom_killed", "initiating", 4)
    aborted = first("gh-nvidia-megatron-lm-1874", shipped_library)  # "pure virtual method called", unprefixed
    assert (aborted.id, aborted.rank) == ("proc.cpp_abort", 0)


def test_a_local_rank_of_a_job_on_several_nodes_names_no_rank(shipped_library: Library) -> None:
    """The same log after its agent's rendezvous said two nodes: local rank 4 is not global rank 4."""
    two_nodes = b"  group_rank=0\n  group_world_size=2\n"
    killed = first("gh-dachengli1-longchat-9", shipped_library, before=two_nodes)
    assert (killed.id, killed.rank) == ("host.oom_killed", None)


def test_nccl_s_own_lines_say_which_rank_a_process_is(shipped_library: Library) -> None:
    """The NCCL WARN "Cuda failure 'out of memory'" of pid 3018451, whose send channels are rank 0's."""
    d = diagnose_many(load_case(CORPUS / "gh-pku-yuangroup-open-sora-plan-386").read(), shipped_library, threads=1)
    oom = d.candidates[0]
    assert (oom.id, oom.role, oom.rank) == ("cuda.oom", "initiating", 0)
    assert "3018451" in oom.evidence[0].text


def test_horovod_s_stall_report_names_the_stalled_rank(shipped_library: Library) -> None:
    """Rank 0 (the coordinator) prints the stall report; "6: [horovod_allreduce.0, ...]" is the rank waited for."""
    stall = first("gh-horovod-horovod-1442", shipped_library)
    assert (stall.id, stall.role, stall.rank, stall.ranks) == ("dist.collective_mismatch", "initiating", 6, [6])


def test_a_stall_report_of_several_ranks_names_none(shipped_library: Library) -> None:
    """Two ranks stalled: no one rank the others waited for, so the report keeps its printer's prefix rank."""
    text = (
        b"[1,0]<stderr>:[2024-05-02 10:11:12.123456: W horovod/common/stall_inspector.cc:107] One or more tensors"
        b" were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder"
        b" of ranks for more than 60 seconds. This may indicate that different ranks are trying to submit different"
        b" tensors or that only subset of ranks is submitting tensors, which will cause deadlock. \n"
        b"[1,0]<stderr>:Missing ranks:\n"
        b"[1,0]<stderr>:1: [DistributedAdam_Allreduce/cond/HorovodAllreduce_grads_0]\n"
        b"[1,0]<stderr>:3!: [DistributedAdam_Allreduce/cond/HorovodAllreduce_grads_0]\n"
    )
    stall = diagnose_many([("log", text)], shipped_library, threads=1).candidates[0]
    assert (stall.id, stall.rank) == ("dist.collective_mismatch", 0)


def test_a_launcher_summary_alone_gives_the_rank_it_names(shipped_library: Library) -> None:
    """Only torchrun's ChildFailedError summary is in the paste: its Root Cause "rank : 0" is the answer's rank."""
    summary = first("gh-huggingface-accelerate-3206", shipped_library)
    assert (summary.id, summary.rank) == ("dist.child_failed", 0)


def test_mpirun_s_rank_is_read_when_the_pid_is_masked(shipped_library: Library) -> None:
    """mpirun's "noticed that process rank 1 with PID xxxxxx ... exited on signal 9 (Killed)": rank 1 was killed."""
    killed = first("gh-kay1794-aware-of-the-history-2", shipped_library)
    assert (killed.id, killed.role, killed.rank) == ("host.oom_killed", "initiating", 1)


def test_an_old_stall_report_s_per_tensor_lists_name_the_stalled_rank(shipped_library: Library) -> None:
    """Horovod before 0.16.2 lists the missing ranks per tensor ("... [missing ranks: 815]"), unprefixed."""
    stall = first("gh-horovod-horovod-457", shipped_library)
    assert (stall.id, stall.role, stall.rank, stall.ranks) == ("dist.collective_mismatch", "initiating", 815, [815])


def test_per_tensor_lists_of_several_ranks_name_none(shipped_library: Library) -> None:
    """One tensor waits for ranks 3 and 5, another for 3: two stalled ranks, so no one rank is named."""
    text = (
        b"WARNING: One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and"
        b" are waiting for remainder of ranks for more than 60 seconds. This may indicate that different ranks are"
        b" trying to submit different tensors or that only subset of ranks is submitting tensors, which will cause"
        b" deadlock. \n"
        b"Stalled ops:\n"
        b"HorovodAllreduce_gradients_AddN_37_0 [missing ranks: 3, 5]\n"
        b"HorovodAllreduce_gradients_AddN_44_0 [missing ranks: 3]\n"
    )
    stall = diagnose_many([("log", text)], shipped_library, threads=1).candidates[0]
    assert (stall.id, stall.rank) == ("dist.collective_mismatch", None)
