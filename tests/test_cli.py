"""`tracelore diagnose` and `tracelore lint`: exit codes, formats, stdout vs stderr."""

from __future__ import annotations

import gzip
import itertools
import json
import os
import pty
import re
import shutil
import subprocess
import sys
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
    assert out.startswith("Verdict: CUDA out of memory on rank 5, line 2")  # the answer first, one line
    assert "\n\nINITIATING: CUDA out of memory [cuda.oom]" in out
    assert "rank 5" in out and "»torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB«" in out


def test_nothing_found_exits_0(tmp_path: Path) -> None:
    log = tmp_path / "ok.log"
    log.write_bytes(HEALTHY)
    code, out, _ = run("diagnose", str(log))
    assert (code, out.splitlines()[:2]) == (
        0,
        [
            "No error: the log stops mid-run (20 lines, 1,060 bytes).",
            "The log stops on training progress (line 20) without an error, so the run was killed from outside, "
            "is still running or hung, or the log was cut.",
        ],
    )


def test_a_finished_run_reads_healthy_and_exits_0(tmp_path: Path) -> None:
    log = tmp_path / "ok.log"
    log.write_bytes(HEALTHY + b"{'train_runtime': 61.2, 'train_loss': 1.1, 'epoch': 3.0}\nTraining completed.\n")
    code, out, _ = run("diagnose", str(log))
    assert (code, out.splitlines()[:2]) == (
        0,
        ["Looks healthy (22 lines, 1,137 bytes).", "The run finished normally (line 22) and no failure was found."],
    )
    code, out, _ = run("diagnose", "--format", "json", str(log))
    assert json.loads(out)["ending"] == {
        "state": "completed",
        "line": 22,
        "file": str(log),
        "rank": None,
        "text": "Training completed.",
        "step": None,
    }


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


def test_a_url_says_how_to_pipe_it_in() -> None:
    code, out, err = run("diagnose", "https://example.com/runs/42/train.log")
    assert code == 2 and out == ""
    assert "curl -sL 'https://example.com/runs/42/train.log' | tracelore diagnose -" in err


def test_an_empty_rank_file_among_others_is_reported(tmp_path: Path) -> None:
    (tmp_path / "rank0.log").write_bytes(b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    (tmp_path / "rank1.log").write_bytes(b"")
    code, out, err = run("diagnose", str(tmp_path / "rank0.log"), str(tmp_path / "rank1.log"))
    assert code == 1 and "cuda.oom" in out
    assert f"note: {tmp_path / 'rank1.log'} is empty (0 bytes)" in err


# A Chinese-locale Windows console writes GBK; pasted as UTF-8, each of its messages becomes a
# run of U+FFFD (what `bytes.decode("utf-8", "replace")` makes of it), the English lines intact.
_CONSOLE = "错误：找不到指定的模块。 进程已结束，退出代码 1".encode("gbk")
MOJIBAKE = (
    b"UserWarning: TypedStorage is deprecated.\r\n"
    + _CONSOLE.decode("utf-8", "replace").encode()
    + b"\r\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\r\n"
)


def test_a_garbled_paste_is_text_and_the_report_says_some_lines_were_unreadable(tmp_path: Path) -> None:
    pasted = tmp_path / "paste.log"
    pasted.write_bytes(MOJIBAKE)
    code, out, err = run("diagnose", str(pasted))
    assert code == 1, err
    assert "could not be read (replacement characters, U+FFFD)" in out and "[cuda.oom]" in out
    raw = tmp_path / "console.log"  # the console's own bytes, in its code page
    raw.write_bytes(b"UserWarning: x\r\n" + _CONSOLE * 8 + b"\r\nRuntimeError: CUDA out of memory.\r\n")
    code, out, err = run("diagnose", str(raw))
    assert code == 1 and "[cuda.oom]" in out, err


def test_binary_input_is_an_input_error_as_the_api_answers_415(tmp_path: Path) -> None:
    log = tmp_path / "weights.log"
    log.write_bytes(bytes(range(256)) * 1000)
    code, out, err = run("diagnose", str(log), "--format", "json")
    assert (code, out) == (2, "")
    assert "weights.log: this looks like binary data, not a text log" in err
    code, out, err = run("diagnose", "-", input=b"\x00\x01\x02\x03" * 4096)
    assert (code, out) == (2, "") and "<stdin>: this looks like binary data" in err
    code, _, err = run("diagnose", "-", input=b"\xff\xfe" + "CUDA out of memory".encode("utf-16-le"))
    assert code == 2 and "UTF-16" in err


def test_gzip_on_standard_input_is_read_like_a_gz_file(tmp_path: Path) -> None:
    packed = gzip.compress(b"starting\n" * 5000 + OOM)
    code, out, _ = run("diagnose", "-", "--format", "json", input=packed)
    assert code == 1
    data = json.loads(out)
    assert data["candidates"][0]["id"] == "cuda.oom" and data["candidates"][0]["line"] == 5001
    # A gzip file without the .gz suffix is found by its magic bytes too.
    disguised = tmp_path / "train.log"
    disguised.write_bytes(packed)
    assert run("diagnose", str(disguised))[0] == 1


def test_text_links_are_full_addresses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(OOM)
    monkeypatch.delenv("TRACELORE_BASE_URL", raising=False)
    code, out, err = run("diagnose", str(log))
    assert code == 1 and "  more: http://127.0.0.1:8000/failures/cuda.oom" in out
    assert "set --base-url or TRACELORE_BASE_URL" in err
    code, out, err = run("diagnose", str(log), "--base-url", "https://tracelore.example.org/")
    assert "  more: https://tracelore.example.org/failures/cuda.oom" in out and err == ""
    monkeypatch.setenv("TRACELORE_BASE_URL", "https://env.example.org")
    assert "  more: https://env.example.org/failures/cuda.oom" in run("diagnose", str(log))[1]


def test_one_line_is_one_line(tmp_path: Path) -> None:
    log = tmp_path / "one.log"
    log.write_bytes(b"all good\n")
    code, out, _ = run("diagnose", str(log))
    assert (code, out.splitlines()[0]) == (0, "No known failure found (1 line, 9 bytes).")
    assert "1 lines" not in out


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


def _run_with_stderr_on_a_terminal(args: list[str]) -> tuple[int, bytes, bytes]:
    """Run the real command with standard error on a pseudo-terminal; return its code, stdout and the terminal's output."""
    master, slave = pty.openpty()
    with subprocess.Popen([sys.executable, "-m", "app", *args], stdout=subprocess.PIPE, stderr=slave) as proc:
        os.close(slave)
        seen = bytearray()
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the terminal closes when the process ends
                break
            if not chunk:
                break
            seen += chunk
        out = proc.stdout.read() if proc.stdout else b""
        code = proc.wait(120)
    os.close(master)
    return code, out, bytes(seen)


def test_a_large_input_shows_progress_on_a_terminal_and_nothing_elsewhere(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    with log.open("wb") as f:
        for _ in range(24):
            f.write(HEALTHY * 20_000)  # 24 x 1 MB: past the 16 MiB where progress starts
    code, out, terminal = _run_with_stderr_on_a_terminal(["diagnose", str(log)])
    assert code == 0 and out.startswith(b"No error: the log stops mid-run")
    assert re.search(rb"reading .*big\.log: \d+\.\d MB \(\d+\.\d [KMG]B/s\)", terminal), terminal[:300]
    assert terminal.endswith(b"\r\x1b[K"), "the progress line is taken away at the end"
    # Not a terminal: silent.
    quiet = subprocess.run([sys.executable, "-m", "app", "diagnose", str(log)], capture_output=True, timeout=120)
    assert quiet.returncode == 0 and quiet.stderr == b""


def test_help_lists_every_command_grouped_with_its_whole_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.cli import COMMANDS, SECTIONS

    listed = [name for summaries in SECTIONS.values() for name in summaries]
    assert sorted(listed) == sorted(COMMANDS)  # each command once, none left out
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run("--help")
    assert code == 0
    assert not any("..." in line for line in out.splitlines()[1:])  # the usage line ends in [ARGS]...
    for title, summaries in SECTIONS.items():
        assert f"{title}:" in out
        for name, summary in summaries.items():
            assert f"  {name}" in out and summary in " ".join(out.split()), name
    assert max(len(line) for line in out.splitlines()) <= 80
