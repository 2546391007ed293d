"""Every launcher's and logger's prefix: rank, host, time and where the content starts."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from app.core.engine.diagnose import diagnose_many
from app.core.engine.prefixes import parse_prefixes
from app.core.knowledge.loading import Library
from app.core.times import Yearless
from app.evaluation.corpus import load_case

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "cases"

CASES = [
    # line, rank, host, time, content
    ("[rank3]: RuntimeError: x", 3, None, None, "RuntimeError: x"),
    ("[default3]:RuntimeError: x", 3, None, None, "RuntimeError: x"),
    ("3: RuntimeError: x", 3, None, None, "RuntimeError: x"),
    ("[1,3]<stderr>: RuntimeError: x", 3, None, None, "RuntimeError: x"),
    # horovodrun (Gloo): "[3]<stderr>:", with --prefix-timestamp after time.asctime()
    ("[3]<stderr>:Segmentation fault (core dumped)", 3, None, None, "Segmentation fault (core dumped)"),
    (
        "Mon Jun  7 11:51:57 2021[2]<stderr>:  what():  HTTP request failed.",
        2,
        None,
        datetime(2021, 6, 7, 11, 51, 57),
        " what():  HTTP request failed.",
    ),
    ("worker-1: RuntimeError: x", None, "worker-1", None, "RuntimeError: x"),
    (
        "node001: [2024-06-14 10:12:33,456] [INFO] x",
        None,
        "node001",
        datetime(2024, 6, 14, 10, 12, 33, 456000),
        "[INFO] x",
    ),
    ("2024-06-14T10:12:33.123456789Z x", None, None, datetime(2024, 6, 14, 10, 12, 33, 123456), "x"),
    ("2024-06-14T12:12:33+02:00 x", None, None, datetime(2024, 6, 14, 10, 12, 33), "x"),
    ("[2024-06-14 10:12:33,456] x", None, None, datetime(2024, 6, 14, 10, 12, 33, 456000), "x"),
    ("I0614 10:12:33.456789  1234 train.cpp:12] x", None, None, Yearless.at(6, 14, 10, 12, 33, 456789), "x"),
    (
        "[rank0]:[E0614 10:12:33.456789 1234 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog",
        0,
        None,
        Yearless.at(6, 14, 10, 12, 33, 456789),
        "[Rank 0] Watchdog",
    ),
    # NCCL's "[2]" is the CUDA device the process uses (cudaGetDevice, src/debug.cc), not a rank
    ("node1:1234:5678 [2] NCCL INFO Bootstrap", None, "node1", None, "NCCL INFO Bootstrap"),
    ("[12345.678901] NVRM: Xid (PCI:0000:3b:00): 79", None, None, None, "NVRM: Xid (PCI:0000:3b:00): 79"),
    # dmesg -T prints the time with its year (util-linux's ctime form)
    (
        "[Tue Jan  9 07:12:31 2024] NVRM: Xid (PCI:0000:3b:00): 79",
        None,
        None,
        datetime(2024, 1, 9, 7, 12, 31),
        "NVRM: Xid (PCI:0000:3b:00): 79",
    ),
    (
        "Jun 14 10:12:33 node7 kernel: [12345.678] Out of memory",
        None,
        "node7",
        Yearless.at(6, 14, 10, 12, 33),
        "Out of memory",
    ),
    (
        "2024-06-14T10:12:33+0000 node7 kernel: Out of memory",
        None,
        "node7",
        datetime(2024, 6, 14, 10, 12, 33),
        "Out of memory",
    ),
    ("0: [rank0]: x", 0, None, None, "x"),
    # vLLM's logger since v0.8 under its engine process's prefix (vllm-project/vllm#23176)
    (
        "(EngineCore_0 pid=1179302) ERROR 08-19 13:12:57 [core.py:708] Traceback (most recent call last):",
        None,
        None,
        Yearless.at(8, 19, 13, 12, 57),
        "Traceback (most recent call last):",
    ),
    # vLLM's logger before v0.8 (vllm-project/vllm#9377)
    (
        "ERROR 10-16 05:20:48 registry.py:264] ImportError: /usr/local/lib/python3.10/dist-packages/x.so",
        None,
        None,
        Yearless.at(10, 16, 5, 20, 48),
        "ImportError: /usr/local/lib/python3.10/dist-packages/x.so",
    ),
    # A Ray actor's output on the driver, then torchrun's rank and c10's time (OpenRLHF/OpenRLHF#621)
    (
        "(RayWorkerWrapper pid=92234, ip=172.19.24.110) [rank1]:[E1224 13:23:05.483840160 ProcessGroupNCCL.cpp:542]"
        " [Rank 12] Collective WorkNCCL(SeqNum=1, OpType=BROADCAST",
        1,
        "172.19.24.110",
        Yearless.at(12, 24, 13, 23, 5, 483840),
        "[Rank 12] Collective WorkNCCL(SeqNum=1, OpType=BROADCAST",
    ),
    # A data-parallel engine's index is not a rank; the traceback's indent stays content
    ("(EngineCore_DP0 pid=6880)     kv_cache_configs = f(", None, None, None, "    kv_cache_configs = f("),
    (
        "(VllmWorker rank=1 pid=97) INFO 05-06 10:11:12 [gpu_worker.py:12] x",
        1,
        None,
        Yearless.at(5, 6, 10, 11, 12),
        "x",
    ),
    ("(pid=4004) x", None, None, None, "x"),  # older Ray: a task without a name
    # torchrun --role trainer: the elastic agent's "[${role_name}${local_rank}]:"
    ("[trainer1]:RuntimeError: x", 1, None, None, "RuntimeError: x"),
    # srun --label pads the task id to the width of the largest; a heterogeneous job's component first
    (' 2: [rank2]:   File "call.py", line 46', 2, None, None, '  File "call.py", line 46'),
    ("P1  3: RuntimeError: x", 3, None, None, "RuntimeError: x"),
    # Open MPI's "[host:pid] ", the pid padded to five digits; a source location is not one
    ("[h06c0901:07661] Signal: Segmentation fault (11)", None, "h06c0901", None, "Signal: Segmentation fault (11)"),
    (
        "[1,3]<stderr>:[gn05:194928] *** Process received signal ***",
        3,
        "gn05",
        None,
        "*** Process received signal ***",
    ),
    ("[train.py:12345] x", None, None, None, "[train.py:12345] x"),
    ("[12:34] x", None, None, None, "[12:34] x"),
    # Python logging in the cookbook's format, with and without the logger's name
    (
        "2022-06-21 20:40:24,602 - speechbrain.core - ERROR - Exception:",
        None,
        None,
        datetime(2022, 6, 21, 20, 40, 24, 602000),
        "Exception:",
    ),
    (
        "2020-01-20 11:00:54,975 - WARNING - WARNING: Loss is NaN",
        None,
        None,
        datetime(2020, 1, 20, 11, 0, 54, 975000),
        "WARNING: Loss is NaN",
    ),
    ("- see below - ERROR - x", None, None, None, "- see below - ERROR - x"),
    # a colour code whose ESC byte the paste lost, before Ray's prefix and after it
    (
        "[36m(RayWorkerWrapper pid=4009) [rank1]:[E ProcessGroupNCCL.cpp:563] x",
        1,
        None,
        None,
        "[E ProcessGroupNCCL.cpp:563] x",
    ),
    ("[2m[36m(RayTrainWorker pid=1942, ip=10.0.0.2)[0m x", None, "10.0.0.2", None, "x"),
    ("←[36mcli.azure.cli.core.azclierror: x", None, None, None, "cli.azure.cli.core.azclierror: x"),
    ("[malloc_or_wait] Unable to allocate", None, None, None, "[malloc_or_wait] Unable to allocate"),
    ("(pid 5) x", None, None, None, "(pid 5) x"),
    ("ERROR 2024 x", None, None, None, "ERROR 2024 x"),
    ("Traceback (most recent call last):", None, None, None, "Traceback (most recent call last):"),
    ("ERROR: x", None, None, None, "ERROR: x"),
]


@pytest.mark.parametrize(("line", "rank", "host", "time", "content"), CASES, ids=[c[0][:30] for c in CASES])
def test_prefixes(line: str, rank: int | None, host: str | None, time: datetime | None, content: str) -> None:
    p = parse_prefixes(line)
    assert (p.rank, p.host, p.time, line[p.end :]) == (rank, host, time, content)


def test_recent_c10_logging_has_an_unpadded_month_and_no_thread_id() -> None:
    """torch >= 2.4 prints "[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607]": 21 March, no pid."""
    p = parse_prefixes("[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught")
    assert (p.rank, p.time) == (0, Yearless.at(3, 21, 2, 7, 8, 408271))
    december = parse_prefixes("[rank4]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 4] x")
    assert (december.rank, december.time) == (4, Yearless.at(12, 6, 18, 44, 12, 715298))


def test_docker_compose_service_prefix_is_stripped() -> None:
    line = "trainer-1  | _pickle.UnpicklingError: pickle data was truncated"
    assert line[parse_prefixes(line).end :] == "_pickle.UnpicklingError: pickle data was truncated"


def test_an_nccl_device_index_is_not_a_rank(shipped_library: Library) -> None:
    """NCCL's `host:pid:tid [N]` prints the CUDA device the thread uses, the local GPU index.

    vllm-project/vllm#10453: the process that prints `[rank1]:` logs its NCCL lines on device `[0]`.
    NVIDIA/nccl#1814: a per-rank file of NCCL lines on device `[4]` is the rank its name gives.
    """
    vllm = load_case(CORPUS / "gh-vllm-project-vllm-10453").read()[0][1].decode().split("\n")
    assert vllm[0].startswith("h100-2:412:433 [0] NCCL INFO") and parse_prefixes(vllm[0]).rank is None
    paste = (CORPUS / "gh-nvidia-nccl-1814" / "log.txt").read_bytes()
    assert b"hostname-test:984:1357 [4] NCCL INFO" in paste
    d = diagnose_many([("rank12.log", paste)], shipped_library, threads=1)
    c = d.candidates[0]
    assert (c.id, c.rank) == ("nccl.network_ib", 12)
    assert {e.rank for e in c.evidence} == {12}  # never device 4 taken for rank 4


def test_milabench_s_tag_and_pipe_come_before_torchrun_s_rank() -> None:
    """milabench's terminal log (TagConsole): "{tag} [stderr] {line}", the worker's torchrun prefix after it."""
    line = "diffusion-nodes.cn-n001.server.mila.quebec.nolog [stderr] [rank14]: FileNotFoundError: No such file"
    p = parse_prefixes(line)
    assert (p.rank, line[p.end :]) == (14, "FileNotFoundError: No such file")
    plain = "llama.D0 [stdout] step 10 | loss 2.31"
    assert plain[parse_prefixes(plain).end :] == "step 10 | loss 2.31"


def test_safetensors_missing_file_on_a_milabench_rank(shipped_library: Library) -> None:
    """safetensors' FileNotFoundError (no errno) under its load_file frame, the path wrapped onto the next line."""
    d = diagnose_many(load_case(CORPUS / "gh-mila-iqia-milabench-281").read(), shipped_library, threads=1)
    missing = d.candidates[0]
    assert (missing.id, missing.role, missing.rank) == ("checkpoint.not_found", "initiating", 14)
