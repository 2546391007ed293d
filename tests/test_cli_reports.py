"""`tracelore diagnose` for CI: every format from the command line, extra reports, exit codes, several files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from junitparser import JUnitXml

from app.cli import main
from tests.support import SAMPLES
from tests.test_formats import parse_command, validate_sarif

HEALTHY = b"{'loss': 1.25, 'learning_rate': 5e-05, 'epoch': 0.5}\n" * 20

# A signature whose only fingerprint is weak: what it finds is "possible", never "likely".
WEAK = """\
id: test.weak_hint
title: A weak hint
layer: testing
summary: Something that only hints at a failure.
fingerprints:
  - name: hint
    regex: 'suspicious thing happened'
    weight: 0.3
mechanism: A test signature.
root_causes:
  - cause: none
    tell: none
confirm: [look]
fix: [nothing]
verify: nothing
resume: "safe"
prevention: [nothing]
references:
  - title: none
    url: https://example.org/
examples:
  match:
    - log: suspicious thing happened
      source: made up for a test
  no_match:
    - log: nothing happened
      source: made up for a test
"""


def run(*args: str, input: bytes | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), input=input)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def lib(signatures_dir: Path) -> str:
    return str(signatures_dir)


@pytest.fixture
def oom_log(tmp_path: Path) -> Path:
    path = tmp_path / "rank5.log"
    path.write_bytes((SAMPLES / "ddp-cuda-oom.log").read_bytes())
    return path


def test_every_format_on_the_command_line(lib: str, oom_log: Path, tmp_path: Path) -> None:
    # One run (one library load): SARIF on stdout, the other formats as extra reports.
    junit, github, markdown = tmp_path / "junit.xml", tmp_path / "github.txt", tmp_path / "report.md"
    code, out, _ = run(
        "diagnose", str(oom_log), "--signatures", lib, "--format", "sarif", "--base-url", "https://t.example",
        "--report", f"junit={junit}", "--report", f"github={github}", "--report", f"markdown={markdown}",
    )  # fmt: skip
    assert code == 1
    validate_sarif(json.loads(out))
    suite = next(iter(JUnitXml.fromfile(str(junit))))
    assert suite.failures == 1
    kind, props, _ = parse_command(github.read_text().splitlines()[0])
    assert (kind, props["file"], props["line"]) == ("error", str(oom_log), "20")
    assert "[CUDA out of memory](https://t.example/failures/cuda.oom)" in markdown.read_text()


def test_extra_reports_are_written_beside_stdout(lib: str, oom_log: Path, tmp_path: Path) -> None:
    sarif, summary = tmp_path / "out.sarif", tmp_path / "summary.md"
    code, out, _ = run(
        "diagnose", str(oom_log), "--signatures", lib, "--format", "github",
        "--report", f"sarif={sarif}", "--report", f"markdown={summary}",
    )  # fmt: skip
    assert code == 1 and out.startswith("::error ")
    validate_sarif(json.loads(sarif.read_text()))
    assert summary.read_text().startswith("## Tracelore diagnosis")
    code, _, err = run("diagnose", str(oom_log), "--signatures", lib, "--report", "pdf=x.pdf")
    assert code == 2 and "FORMAT=PATH" in err
    code, _, err = run("diagnose", str(oom_log), "--signatures", lib, "--report", f"json={tmp_path / 'no' / 'x.json'}")
    assert code == 2 and "cannot write the json report" in err


def test_fail_on_decides_the_exit_code(tmp_path: Path) -> None:
    folder = tmp_path / "signatures" / "testing"
    folder.mkdir(parents=True)
    (folder / "test.weak_hint.yaml").write_text(WEAK)
    log = tmp_path / "job.log"
    log.write_bytes(b"step 1\nsuspicious thing happened\n")
    lib = str(tmp_path / "signatures")
    assert run("diagnose", str(log), "--signatures", lib)[0] == 1  # default: any
    assert run("diagnose", str(log), "--signatures", lib, "--fail-on", "likely")[0] == 0
    assert run("diagnose", str(log), "--signatures", lib, "--fail-on", "never")[0] == 0
    ok = tmp_path / "ok.log"
    ok.write_bytes(HEALTHY)
    assert run("diagnose", str(ok), "--signatures", lib, "--fail-on", "any")[0] == 0
    assert run("diagnose", str(log), "--signatures", lib, "--fail-on", "sometimes")[0] == 2


def test_several_files_are_one_job_and_keep_their_names(lib: str, tmp_path: Path) -> None:
    rank0 = tmp_path / "rank0.log"
    rank0.write_bytes(b"[rank0]: step 10 loss 1.0\n" * 3)
    rank5 = tmp_path / "rank5.log"
    rank5.write_bytes((SAMPLES / "ddp-cuda-oom.log").read_bytes())
    code, out, _ = run("diagnose", str(rank0), str(rank5), "--signatures", lib, "--format", "json", "--top", "2")
    data = json.loads(out)
    assert code == 1
    assert data["input"]["files"] == [str(rank0), str(rank5)]
    assert len(data["candidates"]) == 2
    assert data["candidates"][0]["file"] == str(rank5)
    assert {e["file"] for c in data["candidates"] for e in c["evidence"]} == {str(rank5)}
    code, out, _ = run("diagnose", str(rank0), str(rank5), "--signatures", lib)
    assert f"    {rank5}:20 | [rank5]:" in out


def test_full_without_server_is_a_usage_error(lib: str, oom_log: Path) -> None:
    code, _, err = run("diagnose", str(oom_log), "--signatures", lib, "--full")
    assert code == 2 and "--full needs --server" in err


def test_the_verdict_says_how_far_to_trust_it() -> None:
    """What the corpus measured for the named signature, next to the verdict, in text and Markdown."""
    log = Path(__file__).parent / "corpus" / "cases" / "gen-mem-oom-killed-torchrun-rank" / "log.txt"
    for fmt in ("text", "markdown"):
        out = CliRunner().invoke(main, ["diagnose", "--format", fmt, str(log)]).output
        lines = [line for line in out.splitlines() if line.strip()]
        at = next(i for i, line in enumerate(lines) if "Verdict:" in line)
        assert lines[at + 1].startswith("How far to trust it: recognised "), out
        assert "at first sight (logs it had never seen), right in " in lines[at + 1]
