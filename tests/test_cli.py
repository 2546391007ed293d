"""`tracelore diagnose` and `tracelore lint`: exit codes, formats, stdout vs stderr."""

from __future__ import annotations

import gzip
import itertools
import json
import os
import shutil
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from app.cli import main

OOM = b"[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 5 has a total capacity of 79.15 GiB of which 1.23 GiB is free.\n"
HEALTHY = b"{'loss': 1.25, 'learning_rate': 5e-05, 'epoch': 0.5}\n" * 20


SIGNATURES = Path(__file__).resolve().parents[1] / "signatures"


@pytest.fixture(autouse=True)
def small_library(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-file library, so these tests pin the CLI's behaviour, not the library's content."""
    root = tmp_path_factory.mktemp("signatures")
    (root / "memory").mkdir()
    shutil.copy(SIGNATURES / "memory" / "cuda.oom.yaml", root / "memory")
    monkeypatch.setenv("TRACELORE_SIGNATURES_DIR", str(root))


def run(*args: str, input: bytes | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), input=input)
    return result.exit_code, result.stdout, result.stderr


def test_a_failure_exits_1_with_the_initiating_failure_first(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(b"starting\n" + OOM)
    code, out, _ = run("diagnose", str(log))
    assert code == 1
    assert out.startswith("INITIATING: CUDA out of memory [cuda.oom]")
    assert "rank 5" in out and "»torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB«" in out


def test_nothing_found_exits_0(tmp_path: Path) -> None:
    log = tmp_path / "ok.log"
    log.write_bytes(HEALTHY)
    code, out, _ = run("diagnose", str(log))
    assert (code, out.splitlines()[0]) == (0, "No known failure found (20 lines, 1,060 bytes).")


def test_json_is_the_diagnosis_model_and_stdin_works() -> None:
    code, out, _ = run("diagnose", "-", "--format", "json", input=OOM)
    data = json.loads(out)
    assert code == 1
    assert data["schema_version"] == 1
    assert [c["id"] for c in data["candidates"]][:1] == ["cuda.oom"]
    assert data["input"]["files"] == ["<stdin>"]


def test_markdown_and_top(tmp_path: Path) -> None:
    log = tmp_path / "train.log.gz"
    log.write_bytes(gzip.compress(OOM))
    code, out, _ = run("diagnose", str(log), "--format", "markdown", "--top", "1")
    assert code == 1
    assert out.startswith("## Tracelore diagnosis")
    assert "### Initiating failure: CUDA out of memory `cuda.oom`" in out


def test_fail_on_never_and_likely(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(OOM)
    assert run("diagnose", str(log), "--fail-on", "never")[0] == 0
    assert run("diagnose", str(log), "--fail-on", "likely")[0] == 1


def test_input_errors_exit_2_with_a_readable_message(tmp_path: Path) -> None:
    code, out, err = run("diagnose", str(tmp_path / "missing.log"))
    assert code == 2 and out == "" and "cannot read" in err
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    code, out, err = run("diagnose", str(empty))
    assert code == 2 and "the log is empty" in err
    bad_gz = tmp_path / "bad.log.gz"
    bad_gz.write_bytes(b"not gzip")
    code, _, err = run("diagnose", str(bad_gz))
    assert code == 2 and "Error:" in err
    assert run("diagnose")[0] == 2
    assert run("diagnose", str(tmp_path))[0] == 2


def test_binary_garbage_is_read_not_crashed(tmp_path: Path) -> None:
    log = tmp_path / "weights.log"
    log.write_bytes(bytes(range(256)) * 1000)
    code, out, _ = run("diagnose", str(log), "--format", "json")
    assert code in (0, 1)
    assert json.loads(out)["input"]["bytes"] == 256_000


def test_lint_reports_and_exits_1_on_errors(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    folder.mkdir()
    (folder / "a.b.yaml").write_text("id: a.b\n")
    code, out, err = run("lint", str(tmp_path))
    assert code == 1
    assert "a.b.yaml" in err and out.strip().endswith("1 files, 13 errors, 0 warnings")


PER_RANK_JOB = Path(__file__).resolve().parent / "corpus" / "cases" / "gen-dist-per-rank-index-error"


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_diagnose_gives_one_answer_whatever_the_order_of_the_rank_files(fmt: str) -> None:
    """`tracelore diagnose rank*.log` on a real per-rank job: every order of the files, one output."""
    files = sorted(str(p) for p in PER_RANK_JOB.glob("rank*.log"))
    outputs = set()
    for order in itertools.permutations(files):
        code, out, _ = run("diagnose", *order, "--format", fmt, "--signatures", str(SIGNATURES))
        assert code == 1
        outputs.add(out)
    (out,) = outputs
    if fmt == "json":
        initiating = json.loads(out)["candidates"][0]
        assert (initiating["id"], initiating["rank"], initiating["role"]) == (
            "data.index_out_of_range",
            2,
            "initiating",
        )
        assert initiating["file"].endswith("rank2.log")


def test_times_without_a_year_take_the_year_the_files_were_written(tmp_path: Path) -> None:
    # Real per-rank files whose only times are torchrun's year-less glog lines ("W1201 14:...").
    case = Path(__file__).resolve().parent / "corpus" / "cases" / "gen-dist-two-node-store-host-dies"
    logs = []
    for src in sorted(case.glob("rank*.log")):
        dst = tmp_path / src.name
        shutil.copyfile(src, dst)
        stamp = datetime(2026, 12, 1, 15, 0).timestamp()
        os.utime(dst, (stamp, stamp))
        logs.append(str(dst))
    code, out, _ = run("diagnose", *logs, "--format", "json", "--signatures", str(SIGNATURES))
    assert code == 1
    d = json.loads(out)
    assert d["input"]["start"].startswith("2026-12-01T14:") and d["input"]["end"].startswith("2026-12-01T14:")
    assert '"--12-' not in out
    # Standard input has no file time: the same log stays without a year.
    code, out, _ = run(
        "diagnose", "-", "--format", "json", "--signatures", str(SIGNATURES), input=Path(logs[0]).read_bytes()
    )
    assert json.loads(out)["input"]["start"].startswith("--12-01T14:")
