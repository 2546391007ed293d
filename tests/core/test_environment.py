"""The job's environment read from its own lines: real corpus logs, each fact with its line, nothing invented."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.engine.diagnose import diagnose, diagnose_many
from app.core.engine.versions import same_version, satisfies, spec_problem
from app.core.knowledge.loading import Library
from app.core.models import Diagnosis, EnvFact
from app.core.selection.excerpt import Excerpt, diagnose_excerpt
from app.evaluation.corpus import load_case

CASES = Path(__file__).resolve().parents[1] / "corpus" / "cases"


def _case(case_id: str, library: Library) -> Diagnosis:
    case = load_case(CASES / case_id)
    return diagnose_many([(p.name, p) for p in case.logs], library, threads=1)


# Facts that choose the fix steps (app/core/engine/advice.py), tested in tests/core/test_advice.py.
SETTING = frozenset({"framework", "program", "os", "storage"})


def _read(d: Diagnosis) -> list[EnvFact]:
    """The facts the tests here hold: versions, hardware, topology, launcher and Slurm job."""
    return [f for f in d.environment.facts if f.name not in SETTING]


def _facts(d: Diagnosis) -> list[tuple[str, str, int, int | None]]:
    return [(f.name, f.value, f.line, f.rank) for f in _read(d)]


def _line(case_id: str, no: int) -> str:
    return (CASES / case_id / "log.txt").read_bytes().decode("utf-8").split("\n")[no - 1]  # bytes: a lone CR is no line


@pytest.mark.parametrize(
    ("case_id", "expected"),
    [
        # A repro script's banner: a nightly with its CUDA in the local part, and the GPU.
        (
            "gh-pytorch-pytorch-122192",
            [
                ("torch", "2.13.0.dev20260516+cu130", 1, None),
                ("cuda", "13.0", 1, None),
                ("gpu", "NVIDIA H100", 3, None),
            ],
        ),
        # "found version 10010" is the driver's CUDA, 10.1; YOLOv5's banner names torch.
        ("gh-ultralytics-yolov5-2389", [("cuda_driver", "10.1", 1, None), ("torch", "1.7.1", 3, None)]),
        # NCCL's version from torch's DistBackendError, on the rank that printed it.
        ("gh-vllm-project-vllm-10453", [("python", "3.12", 12, 1), ("nccl", "2.21.5", 18, 1)]),
        # Slurm: srun's own messages, the step's job id, and torchrun in the traceback (the elastic
        # agent's RendezvousClosedError on line 4 is torchrun's, so it names no launcher of its own).
        (
            "gh-pytorch-pytorch-116974",
            [
                ("python", "3.10", 2, None),
                ("launcher", "srun", 5, None),
                ("job_id", "21941655", 6, None),
                ("launcher", "torchrun", 16, None),
            ],
        ),
        # The NumPy 2 ABI message names the NumPy that runs on its second line.
        ("gh-jupyter-notebook-7522", [("numpy", "2.0.0", 3, None)]),
        # The GPU and its architecture from torch's capability warning.
        (
            "gh-sconlyshootery-featdepth-68",
            [("gpu", "NVIDIA GeForce RTX 3060 Laptop GPU", 2, None), ("gpu_arch", "sm_86", 2, None)],
        ),
    ],
)
def test_facts_are_what_the_lines_say_with_their_line_numbers(
    shipped_library: Library, case_id: str, expected: list[tuple[str, str, int, int | None]]
) -> None:
    d = _case(case_id, shipped_library)
    assert _facts(d) == expected
    for name, value, no, _ in expected:
        raw = _line(case_id, no)
        shown = {"cuda": "cu130", "cuda_driver": "10010", "launcher": "srun: " if value == "srun" else "bin/torchrun"}
        assert shown.get(name, value) in raw
    assert d.environment.conflicts == []


def test_the_gpu_memory_of_an_oom_is_read_on_its_rank(shipped_library: Library) -> None:
    d = _case("gh-hiyouga-llamafactory-7781", shipped_library)
    memory = d.environment.first("gpu_memory")
    assert memory is not None and (memory.value, memory.line, memory.rank) == ("23.65 GiB", 1, 7)
    assert "GPU 7 has a total capacity of 23.65 GiB" in memory.text


def _shown_by(fact: EnvFact, raw: str) -> bool:
    """Whether the raw line states the fact (derived values in the form the line prints them)."""
    if fact.name == "cuda" and "+cu" in raw:
        return "cu" + fact.value.replace(".", "") in raw
    if fact.name == "cuda_driver" and "found version" in raw:
        major, minor = fact.value.split(".")
        return f"found version {int(major) * 1000 + int(minor) * 10}" in raw
    if fact.name == "gpu_memory" and fact.value.endswith(" MiB") and "MiB /" in raw:
        return fact.value.replace(" ", "") in raw
    if fact.name in ("launcher", "gpus", "os", "storage"):
        return True  # a name for what the line shows (`/bin/torchrun`, `srun: `, `C:\\Users\\`) or a count of lines
    if fact.name == "framework":
        package = {"pytorch": "torch", "lightning": "lightning", "keras": "keras"}.get(fact.value, fact.value)
        return package in raw  # a frame in its package's directory (pytorch_lightning, tf_keras too)
    if fact.name == "program":
        return "Traceback (most recent call last)" in raw
    return fact.value in raw


def test_nothing_is_reported_that_the_log_does_not_show(shipped_library: Library) -> None:
    """Over every corpus case: each fact sits on a line of its file that states it."""
    seen = 0
    for case_dir in sorted(CASES.iterdir()):
        case = load_case(case_dir)
        d = diagnose_many([(p.name, p) for p in case.logs], shipped_library, threads=1)
        texts = {p.name: p.read_bytes().decode("utf-8", errors="replace").split("\n") for p in case.logs}
        for fact in d.environment.facts:
            lines = texts[fact.file or case.logs[0].name]
            raw = lines[fact.line - 1]
            if len(fact.text) > len(raw.rstrip("\r")) and fact.text.startswith(raw.rstrip("\r")[:200]):
                # a message a console hard-wrapped, read rejoined: the lines it was wrapped onto state it too
                raw = "".join(line.rstrip("\r") for line in lines[fact.line - 1 : fact.line + 40])
            assert _shown_by(fact, raw), (case_dir.name, fact)
            seen += 1
        assert d.environment.conflicts == [], case_dir.name  # no corpus job mixes versions or GPUs
    assert seen > 500


@pytest.mark.parametrize(
    "case_id",
    # "In PyTorch 2.6, we changed the default ..." names a release in prose, not the one running.
    ["gen-ckpt-weights-only-argparse", "gh-cubiq-comfyui_instantid-255", "gh-gensyn-ai-rl-swarm-118"],
)
def test_a_release_named_in_prose_is_not_the_version_running(shipped_library: Library, case_id: str) -> None:
    assert _case(case_id, shipped_library).environment.first("torch") is None


def test_a_required_version_is_not_an_installed_one(shipped_library: Library) -> None:
    log = b"This script requires torch 2.3 or later\nPlease install transformers>=4.40\nRuntimeError: boom\n"
    assert _read(diagnose(log, shipped_library, threads=1)) == []


def test_a_number_after_a_library_name_in_prose_is_not_its_version(shipped_library: Library) -> None:
    log = b"Downloading datasets 1.25 GB\nlightning 2.1 times faster\ntorch 2.1 GB free\ntransformers 4.41.2\n"
    d = diagnose(log, shipped_library, threads=1)
    assert [(f.name, f.value, f.line) for f in _read(d)] == [("transformers", "4.41.2", 4)]


REAL_SMI_HEADER = "| NVIDIA-SMI 470.129.06   Driver Version: 470.129.06   CUDA Version: 11.4     |"


def test_pytorch_built_for_a_newer_cuda_than_the_driver_is_a_conflict(shipped_library: Library) -> None:
    """collect_env's wording and a real nvidia-smi header (deepspeedai/DeepSpeed#2055)."""
    log = f"PyTorch version: 2.1.0+cu121\n{REAL_SMI_HEADER}\nRuntimeError: boom\n".encode()
    d = diagnose(log, shipped_library, threads=1)
    (conflict,) = d.environment.conflicts
    assert conflict.kind == "cuda_driver"
    assert [(f.name, f.value, f.line) for f in conflict.facts] == [("cuda", "12.1", 1), ("cuda_driver", "11.4", 2)]
    assert "built for CUDA 12.1 (line 1)" in conflict.summary and "up to 11.4 (line 2)" in conflict.summary
    same_major = f"PyTorch version: 2.1.0+cu113\n{REAL_SMI_HEADER}\n".encode()
    assert diagnose(same_major, shipped_library, threads=1).environment.conflicts == []  # minor versions are compatible


def test_two_nccl_versions_across_ranks_are_a_conflict(shipped_library: Library) -> None:
    """Two real NCCL error lines (vllm-project/vllm#10453, NVIDIA/Megatron-LM#661), one per rank's file.

    No corpus job mixes NCCL versions, so the job is put together from two real lines.
    """
    rank0 = _line("gh-vllm-project-vllm-10453", 18).replace("[rank1]: ", "")
    rank1 = _line("gh-nvidia-megatron-lm-661", 2)
    d = diagnose_many([("rank0.log", rank0.encode()), ("rank1.log", rank1.encode())], shipped_library, threads=1)
    (conflict,) = d.environment.conflicts
    assert conflict.kind == "across_ranks"
    assert [(f.value, f.file, f.rank) for f in conflict.facts] == [
        ("2.21.5", "rank0.log", 0),
        ("2.19.3", "rank1.log", 1),
    ]
    assert "different nccl versions" in conflict.summary
    same = diagnose_many([("rank0.log", rank0.encode()), ("rank1.log", rank0.encode())], shipped_library, threads=1)
    assert same.environment.conflicts == []


def test_a_line_without_a_rank_proves_no_difference_between_ranks(shipped_library: Library) -> None:
    log = b"[rank0]: NCCL version 2.21.5+cuda12.4\n[rank1]: NCCL version 2.21.5+cuda12.4\nNCCL version 2.19.3\n"
    d = diagnose(log, shipped_library, threads=1)
    assert [(f.value, f.rank) for f in d.environment.facts if f.name == "nccl"] == [("2.21.5", 0), ("2.19.3", None)]
    assert d.environment.conflicts == []


def test_ranks_on_different_gpu_models_are_a_conflict(shipped_library: Library) -> None:
    log = b"[rank0]: GPU 0: NVIDIA A100-SXM4-80GB\n[rank1]: GPU 0: NVIDIA H100 80GB HBM3\n[rank2]: GPU 0: NVIDIA A100-SXM4-80GB\n"
    (conflict,) = diagnose(log, shipped_library, threads=1).environment.conflicts
    assert "different GPU models" in conflict.summary
    assert [(f.value, f.rank) for f in conflict.facts] == [("NVIDIA A100-SXM4-80GB", 0), ("NVIDIA H100 80GB HBM3", 1)]


def test_an_nvidia_smi_table_gives_the_driver_gpus_and_memory(shipped_library: Library) -> None:
    """The table from instructlab/instructlab#2341, as nvidia-smi prints it."""
    table = (
        "| NVIDIA-SMI 550.90.07              Driver Version: 550.90.07      CUDA Version: 12.4     |\n"
        "|   0  NVIDIA A100-SXM4-40GB          On  |   00000001:00:00.0 Off |                    0 |\n"
        "| N/A   37C    P0             56W /  400W |       1MiB /  40960MiB |      0%      Default |\n"
        "|   1  NVIDIA A100-SXM4-40GB          On  |   00000002:00:00.0 Off |                    0 |\n"
        "| N/A   36C    P0             60W /  400W |       1MiB /  40960MiB |      0%      Default |\n"
    )
    d = diagnose(table.encode(), shipped_library, threads=1)
    assert [(f.name, f.value, f.line) for f in _read(d)] == [
        ("cuda_driver", "12.4", 1),
        ("driver", "550.90.07", 1),
        ("gpu", "NVIDIA A100-SXM4-40GB", 2),
        ("gpu_memory", "40960 MiB", 3),
        ("gpus", "2", 2),
    ]


def test_banners_of_deepspeed_vllm_and_transformers_env(shipped_library: Library) -> None:
    """ds_report (deepspeedai/DeepSpeed#6762), vLLM's engine line, `transformers-cli env`, torchrun's args."""
    log = (
        "torch version .................... 2.3.0+cu121\n"
        "deepspeed info ................... 0.15.5+46d7d0d1, 46d7d0d1, patch-1\n"
        "torch cuda version ............... 12.1\n"
        "deepspeed wheel compiled w. ...... torch 2.1, cuda 12.1\n"
        "INFO 01-14 03:08:50 llm_engine.py:234] Initializing an LLM engine (v0.6.6) with config: model='m'\n"
        "- `Accelerate` version: 0.33.0\n"
        "- PyTorch version (GPU?): 2.4.0+cu121 (True)\n"
        "torchrun --nnodes=2 --nproc_per_node=8 train.py\n"
    )
    d = diagnose(log.encode(), shipped_library, threads=1)
    assert [(f.name, f.value, f.line) for f in _read(d)] == [
        ("torch", "2.3.0+cu121", 1),
        ("cuda", "12.1", 1),
        ("deepspeed", "0.15.5+46d7d0d1", 2),
        ("vllm", "0.6.6", 5),
        ("accelerate", "0.33.0", 6),
        ("torch", "2.4.0+cu121", 7),
        ("nodes", "2", 8),
        ("ranks_per_node", "8", 8),
        ("launcher", "torchrun", 8),
    ]  # "compiled w. torch 2.1" is what DeepSpeed was built against, not what runs


def test_an_excerpt_keeps_the_original_line_numbers_of_facts(shipped_library: Library) -> None:
    excerpt = Excerpt(
        lines=((1, "[rank0]: step 1"), (88412, "[rank3]: NCCL version 2.21.5+cuda12.4")),
        total_lines=90000,
        total_bytes=7340032,
    )
    d = diagnose_excerpt(excerpt, shipped_library)
    assert [(f.name, f.value, f.line, f.rank) for f in _read(d)] == [("nccl", "2.21.5", 88412, 3)]


def _with_line(case_id: str, first: str) -> bytes:
    return first.encode() + b"\n" + (CASES / case_id / "log.txt").read_bytes()


def test_a_version_outside_applies_to_lowers_confidence_and_says_why(shipped_library: Library) -> None:
    """A real datasets-4.0 script failure (Lightning-AI/litgpt#2095) with `pip freeze` lines put before it."""
    case = "gh-lightning-ai-litgpt-2095"
    alone = _case(case, shipped_library).initiating
    old = diagnose(_with_line(case, "datasets==3.6.0"), shipped_library, threads=1).initiating
    new = diagnose(_with_line(case, "datasets==4.0.0"), shipped_library, threads=1).initiating
    assert alone is not None and old is not None and new is not None
    assert alone.id == old.id == new.id == "data.hf_dataset_script_unsupported"
    assert old.confidence == pytest.approx(alone.confidence / 2, abs=0.01) and new.confidence == alone.confidence
    assert "datasets 3.6.0 (line 1) is outside >=4.0" in old.why
    assert old.versions[0].startswith("The log shows datasets 3.6.0 (line 1), outside >=4.0 where this failure happens")
    assert new.versions[0].startswith("The log shows datasets 4.0.0 (line 1), where this happens")
    assert "the log does not show the datasets version" in alone.versions[0]


def test_version_notes_follow_the_version_the_log_shows(shipped_library: Library) -> None:
    d = _case("gh-jupyter-notebook-7522", shipped_library)
    c = next(c for c in d.candidates if c.id == "env.numpy_abi")
    assert c.versions == [
        "The log shows numpy 2.0.0 (line 3): NumPy 2.0.0 is a 2.x release, whose C ABI differs from 1.x: upgrade the "
        "extension named in the traceback to a release built against NumPy 2 (or rebuild it), or pin numpy<2 until "
        "it has one."
    ]
    case = "gen-ckpt-weights-only-argparse"
    before = diagnose(_with_line(case, "torch 2.5.1"), shipped_library, threads=1).initiating
    after = diagnose(_with_line(case, "torch 2.7.0+cu126"), shipped_library, threads=1).initiating
    assert before is not None and after is not None
    assert before.versions[0].startswith("The log shows torch 2.5.1 (line 1): before PyTorch 2.6 torch.load defaults")
    assert after.versions[0].startswith("The log shows torch 2.7.0+cu126 (line 1): from PyTorch 2.6 torch.load")
    assert before.confidence == after.confidence  # notes advise; only applies_to changes confidence


def test_every_format_carries_the_environment(shipped_library: Library) -> None:
    from app.core.rendering.ci import render_github, render_junit, render_sarif
    from app.core.rendering.text import render_markdown, render_text

    log = f"PyTorch version: 2.1.0+cu121\n{REAL_SMI_HEADER}\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    d = diagnose(log.encode(), shipped_library, threads=1)
    text, markdown = render_text(d), render_markdown(d)
    assert "PyTorch: 2.1.0+cu121 (line 1)" in text and "ENVIRONMENT CONFLICTS" in text
    assert "| PyTorch | `2.1.0+cu121 (line 1)` |" in markdown and "**Environment conflicts**" in markdown
    sarif = render_sarif(d, tool_version="t")
    run = sarif["runs"][0]  # type: ignore[index]
    assert run["properties"]["environment"]["facts"][0]["value"] == "2.1.0+cu121"
    assert "Environment: PyTorch: 2.1.0+cu121 (line 1)" in run["results"][0]["message"]["text"]
    assert run["results"][0]["properties"]["versions"] == d.candidates[0].versions
    assert 'name="environment.torch" value="2.1.0+cu121 (line 1)"' in render_junit(d)
    github = render_github(d)
    assert "::warning" in github and "Environment conflict" in github


def test_versions_are_read_as_pep_440() -> None:
    assert satisfies("2.6.0a0+ecf3bae40a", ">=2.6") is True  # a container's pre-release counts as its release
    assert satisfies("2.4.0+cu121", ">=2.4,<2.6") is True
    assert satisfies("2.13.0.dev20260516+cu130", "<2.6") is False
    assert satisfies("not a version", ">=1") is None
    assert same_version("3.10", "3.10.12") and same_version("2.1.2", "2.1.2+cu121")
    assert not same_version("2.1.2+cu118", "2.1.2+cu121") and not same_version("2.19.3", "2.21.5")
    assert spec_problem(">=2.x") is not None and spec_problem(">=2.1,<2.6") is None


def test_numpy_2_with_a_pytorch_older_than_2_3_is_unsupported(shipped_library: Library) -> None:
    """The real NumPy 2 ABI message (jupyter/notebook#7522) with a torch banner before it."""
    case = "gh-jupyter-notebook-7522"
    (conflict,) = diagnose(_with_line(case, "torch 2.1.2"), shipped_library, threads=1).environment.conflicts
    assert conflict.kind == "unsupported"
    assert [(f.name, f.value, f.line) for f in conflict.facts] == [("numpy", "2.0.0", 4), ("torch", "2.1.2", 1)]
    assert "PyTorch supports NumPy 2 from 2.3.0 on" in conflict.summary
    assert diagnose(_with_line(case, "torch 2.3.0"), shipped_library, threads=1).environment.conflicts == []


def test_nccl_info_gives_the_drivers_cuda(shipped_library: Library) -> None:
    """NCCL_DEBUG=INFO lines as NVIDIA/nccl#1267 shows them."""
    log = b"instance-8g-96c-4:101707:101707 [0] NCCL INFO cudaDriverVersion 12000\nNCCL version 2.19.3+cuda12.3\n"
    d = diagnose(log, shipped_library, threads=1)
    assert [(f.name, f.value, f.line) for f in _read(d)] == [
        ("cuda_driver", "12.0", 1),
        ("nccl", "2.19.3", 2),
    ]


def test_a_cuda_13_pytorch_needs_a_580_driver(shipped_library: Library) -> None:
    """NVIDIA's minor version compatibility table: CUDA 13.x needs a 580 driver, 12.x a 525 one.

    The banner line is Comfy-Org/ComfyUI#10386's; the driver 570.133.07 (a CUDA 12.8 driver,
    Datura-ai/lium-io#511) in torch.utils.collect_env's wording.
    """
    log = b"pytorch version: 2.9.0+cu130\nNvidia driver version: 570.133.07\n"
    (conflict,) = diagnose(log, shipped_library, threads=1).environment.conflicts
    assert [(f.name, f.value) for f in conflict.facts] == [("cuda", "13.0"), ("driver", "570.133.07")]
    assert "older than 580, the oldest driver for CUDA 13" in conflict.summary
    cu128 = b"pytorch version: 2.7.0+cu128\nNvidia driver version: 570.133.07\n"
    assert diagnose(cu128, shipped_library, threads=1).environment.conflicts == []
    cu121_on_520 = b"pytorch version: 2.1.0+cu121\nNvidia driver version: 520.61.05\n"
    (old,) = diagnose(cu121_on_520, shipped_library, threads=1).environment.conflicts
    assert "older than 525, the oldest driver for CUDA 12" in old.summary


# NVIDIA/nccl-tests#284 ("nccl-tests with 2 gpu nodes times out"), the reporter's NCCL_DEBUG=INFO
# paste from its first "#  Rank  1" line to the master's NCCL version line: the two nodes run
# drivers for different CUDA versions and NCCL builds for different CUDA versions.
NCCL_TESTS_284 = """\
#  Rank  1 Group  0 Pid 475220 on agzen-worker device  0 [0x01] NVIDIA GeForce RTX 4090
agzen-master:3867861:3867861 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to en
agzen-master:3867861:3867861 [0] NCCL INFO Bootstrap: Using enp3s0:10.42.0.4<0>
agzen-worker:475220:475220 [0] NCCL INFO cudaDriverVersion 12020
agzen-worker:475220:475220 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to en
agzen-worker:475220:475220 [0] NCCL INFO Bootstrap: Using eno2:10.42.0.2<0>
agzen-worker:475220:475220 [0] NCCL INFO NCCL version 2.25.1+cuda12.1
agzen-master:3867861:3867861 [0] NCCL INFO cudaDriverVersion 12040
agzen-worker:475220:475228 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.
agzen-worker:475220:475228 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.
agzen-worker:475220:475228 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to en
agzen-worker:475220:475228 [0] NCCL INFO NET/Socket : Using [0]eno2:10.42.0.2<0>
agzen-worker:475220:475228 [0] NCCL INFO PROFILER/Plugin: Could not find: libnccl-profiler.so.
agzen-worker:475220:475228 [0] NCCL INFO Using network Socket
agzen-worker:475220:475228 [0] NCCL INFO ncclCommInitRank comm 0x5576e763b9a0 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0xe0aa8fb0c1f75217 - Init START
agzen-master:3867861:3867861 [0] NCCL INFO NCCL version 2.25.1+cuda12.4
"""


def test_two_nodes_with_drivers_for_different_cuda_versions_are_a_conflict(shipped_library: Library) -> None:
    """NCCL's prefix names the host, not the rank: lines of two hosts come from two processes."""
    d = diagnose(NCCL_TESTS_284.encode(), shipped_library, threads=1)
    (conflict,) = d.environment.conflicts
    assert conflict.kind == "across_ranks"
    assert [(f.name, f.value, f.line, f.host) for f in conflict.facts] == [
        ("cuda_driver", "12.2", 4, "agzen-worker"),
        ("cuda_driver", "12.4", 8, "agzen-master"),
    ]
    assert conflict.summary == (
        # the worker's process says it is rank 1 ("ncclCommInitRank comm 0x... rank 1 nranks 2")
        "nodes of one job report different cuda_driver versions: 12.2 (line 4, rank 1); "
        "12.4 (line 8, host agzen-master)"
    )
    lines = NCCL_TESTS_284.split("\n")
    assert all(lines[f.line - 1] == f.text for f in conflict.facts)  # the evidence is the lines themselves
    one_host = "\n".join(x for x in lines if not x.startswith("agzen-master")).encode()
    assert diagnose(one_host, shipped_library, threads=1).environment.conflicts == []


def test_deepspeed_before_0_16_cannot_refuse_no_sync(shipped_library: Library) -> None:
    """deepspeedai/DeepSpeed#6793's traceback with a `pip freeze` line put before it.

    DeepSpeed 0.16.0 added the assertion; the thread's workaround was deepspeed==0.15.4.
    """
    case = "gh-deepspeedai-deepspeed-6793"
    alone = _case(case, shipped_library).initiating
    old = diagnose(_with_line(case, "deepspeed==0.15.4"), shipped_library, threads=1).initiating
    new = diagnose(_with_line(case, "deepspeed==0.16.0"), shipped_library, threads=1).initiating
    assert alone is not None and old is not None and new is not None
    assert alone.id == old.id == new.id == "deepspeed.zero_no_sync"
    assert old.confidence == pytest.approx(alone.confidence / 2, abs=0.01) and new.confidence == alone.confidence
    assert "deepspeed 0.15.4 (line 1) is outside >=0.16" in old.why
    assert old.versions == [
        "The log shows deepspeed 0.15.4 (line 1), outside >=0.16 where this failure happens (DeepSpeed 0.16.0 "
        "added the check that refuses no_sync under ZeRO stages 2 and 3): look for another cause first."
    ]
    assert new.versions[1].startswith("The log shows deepspeed 0.16.0 (line 1): DeepSpeed 0.16.0 refuses no_sync")


@pytest.mark.parametrize(
    ("case_id", "first", "signature", "advice"),
    [
        # A T4 refused by flash-attn 2 (microsoft/MInference#51).
        ("gh-microsoft-minference-51", "flash-attn==2.5.8", "env.flash_attention_unsupported", "on a T4 or RTX 20xx"),
        # torch._scaled_mm before Ada support (kijai/ComfyUI-HunyuanVideoWrapper#98 names no torch).
        ("gh-kijai-comfyui-hunyuanvideowrapper-98", "torch==2.2.2", "te.fp8_unsupported_gpu", "PyTorch 2.3 and later"),
        # Old _pb2 code under the upb runtime (vm03/payload_dumper#38; the reporter's fix was protobuf 3.19).
        ("gh-vm03-payload_dumper-38", "protobuf==4.21.1", "env.protobuf_incompatible", "protoc older than 3.19"),
    ],
)
def test_version_notes_of_the_new_ranges(
    shipped_library: Library, case_id: str, first: str, signature: str, advice: str
) -> None:
    c = next(
        c for c in diagnose(_with_line(case_id, first), shipped_library, threads=1).candidates if c.id == signature
    )
    package, version = first.split("==")
    shown = "flash_attn" if package == "flash-attn" else package
    assert len(c.versions) == 1 and c.versions[0].startswith(f"The log shows {shown} {version} (line 1): ")
    assert advice in c.versions[0]
    bare = next(c for c in _case(case_id, shipped_library).candidates if c.id == signature)
    assert bare.versions == [] and bare.confidence == c.confidence


def test_other_runtimes_versions_are_facts(shipped_library: Library) -> None:
    """JAX's print_environment_info, TensorFlow's version, a ROCm build of PyTorch, macOS (where MPS runs)."""
    log = (
        b"jax:    0.4.25\njaxlib: 0.4.25\ntensorflow-gpu==2.10.1\ntf_keras==2.15.1\n"
        b"ROCM used to build PyTorch: 6.0.32830-d62f6a171\nOS: macOS 14.2.1 (arm64)\n"
        b"jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8 bytes.\n"
    )
    d = diagnose(log, shipped_library)
    assert d.input.versions == {
        "jax": "0.4.25",
        "jaxlib": "0.4.25",
        "tensorflow": "2.10.1",
        "keras": "2.15.1",
        "rocm": "6.0.32830",
        "macos": "14.2.1",
    }
    assert [f.line for f in d.environment.facts if f.name in ("jax", "rocm")] == [1, 5]
