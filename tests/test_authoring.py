"""Tools for signature authors: `tracelore example add` and `tracelore explain`."""

from __future__ import annotations

import difflib
import gzip
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from app.cli import main
from app.core.authoring.examples import append_example, cut_excerpt, parse_range
from app.core.knowledge.loading import load_library
from app.core.knowledge.parsing import parse_signature
from app.errors import AuthoringError
from tests.test_cli_reports import WEAK

OOM = "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 3 has a total capacity of 79.15 GiB of which 0.5 GiB is free."
TOKEN = "hf_" + "abcdefghijklmnopqrstuvwxyzABCDEF12"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def library_copy(signatures_dir: Path, tmp_path: Path) -> Path:
    root = tmp_path / "signatures"
    shutil.copytree(signatures_dir, root)
    return root


@pytest.fixture
def job_log(tmp_path: Path) -> Path:
    path = tmp_path / "job-4711.log"
    path.write_text(f'starting\nexport HF_TOKEN={TOKEN}\n  File "train.py", line 3\n{OOM}\nbye\n')
    return path


COMMENTED = WEAK.replace("examples:\n", "# Examples come from real logs.\nexamples:\n").replace(
    "  no_match:\n", "    # more to come\n\n  no_match:   # near misses\n"
)


def only_insertions(before: str, after: str) -> list[str]:
    """The lines added; fails if any line of the original was changed or removed."""
    diff = list(difflib.ndiff(before.splitlines(), after.splitlines()))
    assert not [d for d in diff if d.startswith("- ")]
    return [d[2:] for d in diff if d.startswith("+ ")]


def test_append_keeps_the_file_and_adds_a_literal_block(tmp_path: Path) -> None:
    log = '  File "x.py", line 3\n\tindented with a tab\nsuspicious thing happened: "quoted" # not a comment'
    updated = append_example(COMMENTED, log, 'issue #12: "the" report', kind="match")
    added = only_insertions(COMMENTED, updated)
    assert added[0] == '    - source: "issue #12: \\"the\\" report"'
    assert added[1] == "      log: |2"  # the first line starts with a space: explicit indentation
    sig, issues = parse_signature(updated, tmp_path / "test.weak_hint.yaml")
    assert issues == [] and sig is not None
    assert sig.examples.match[-1].log == log.strip()
    assert sig.examples.match[-1].source == 'issue #12: "the" report'
    # Appended at the end of the match list (after its indented comment), before the blank line and no_match.
    new = updated.index('suspicious thing happened: "quoted"')
    assert updated.index("    # more to come") < new < updated.index("\n\n  no_match:")


def test_append_to_no_match_and_refusals(tmp_path: Path) -> None:
    updated = append_example(COMMENTED, "all quiet", "a healthy run", kind="no_match")
    sig, _ = parse_signature(updated, tmp_path / "x.yaml")
    assert sig is not None and sig.examples.no_match[-1].log == "all quiet"
    assert len(sig.examples.match) == 1
    flow = WEAK.replace(
        "  no_match:\n    - log: nothing happened\n      source: made up for a test\n",
        "  no_match: [{log: nothing happened, source: made up}]\n",
    )
    with pytest.raises(AuthoringError, match="flow style"):
        append_example(flow, "x", "y", kind="no_match")
    with pytest.raises(AuthoringError, match="one line"):
        append_example(WEAK, "x", "two\nlines")
    with pytest.raises(AuthoringError, match="examples"):
        append_example("id: a.b\n", "x", "y")


def test_excerpts_are_cut_by_line_and_redacted() -> None:
    data = f"one\ntwo {TOKEN}\nthree\x07\n".encode()
    cut = cut_excerpt(data, (2, 3))
    assert TOKEN not in cut.text and "[REDACTED:huggingface-token]" in cut.text
    assert cut.text.endswith("three\ufffd") and (cut.first, cut.last) == (2, 3)
    assert cut.redactions == {"huggingface-token": 1}
    assert parse_range("7") == (7, 7) and parse_range(" 3 - 9 ") == (3, 9)
    for bad in ("9-3", "0-2", "a-b", ""):
        with pytest.raises(AuthoringError):
            parse_range(bad)
    with pytest.raises(AuthoringError, match="no text on lines"):
        cut_excerpt(data, (10, 12))
    with pytest.raises(AuthoringError, match="at most"):
        cut_excerpt(data, (1, 1000))


def test_example_add_appends_a_redacted_excerpt_that_passes(library_copy: Path, job_log: Path) -> None:
    path = library_copy / "memory" / "cuda.oom.yaml"
    before = path.read_text()
    code, out, err = run(
        "example", "add", "cuda.oom", str(job_log), "--lines", "2-4", "--signatures", str(library_copy)
    )
    assert code == 0, err
    assert "1 huggingface-token redacted" in out and "examples pass" in out
    after = path.read_text()
    added = only_insertions(before, after)
    assert added[0] == '    - source: "job-4711.log, lines 2-4"'
    assert TOKEN not in after and "export HF_TOKEN=[REDACTED:huggingface-token]" in after
    library = load_library(library_copy)
    example = library.signatures["cuda.oom"].examples.match[-1]
    assert example.log.splitlines() == [
        "export HF_TOKEN=[REDACTED:huggingface-token]",
        '  File "train.py", line 3',
        OOM,
    ]


def test_example_add_undoes_an_example_that_fails(library_copy: Path, job_log: Path, tmp_path: Path) -> None:
    path = library_copy / "memory" / "cuda.oom.yaml"
    before = path.read_text()
    # The OOM line as a near miss: cuda.oom fires on it, so it cannot be a no_match example.
    code, _, err = run(
        "example", "add", "cuda.oom", str(job_log), "--lines", "4", "--no-match", "--source", "a run",
        "--signatures", str(library_copy),
    )  # fmt: skip
    assert code == 1
    assert "cuda.oom fired on a near miss" in err and "is unchanged" in err
    assert path.read_text() == before
    packed = tmp_path / "quiet.log.gz"
    packed.write_bytes(gzip.compress(b"export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"))
    code, out, err = run(
        "example", "add", "cuda.oom", str(packed), "--no-match", "--source", "a healthy run",
        "--signatures", str(library_copy),
    )  # fmt: skip
    assert code == 0, err
    assert load_library(library_copy).signatures["cuda.oom"].examples.no_match[-1].source == "a healthy run"


def test_example_add_input_errors_exit_2(library_copy: Path, job_log: Path) -> None:
    lib = ("--signatures", str(library_copy))
    assert "no signature 'no.such'" in run("example", "add", "no.such", str(job_log), *lib)[2]
    code, _, err = run("example", "add", "cuda.oom", str(job_log), "--lines", "5-2", *lib)
    assert code == 2 and "empty" in err
    code, _, err = run("example", "add", "cuda.oom", str(job_log), "--lines", "40-41", *lib)
    assert code == 2 and "no text on lines 40-41" in err


def test_explain_shows_hits_and_the_rankers_decision(signatures_dir: Path, job_log: Path) -> None:
    code, out, _ = run("explain", "cuda.oom", str(job_log), "--signatures", str(signatures_dir))
    assert code == 0
    assert out.startswith("cuda.oom (CUDA out of memory) on 5 lines: fired at line 4")
    assert "initiating, likely" in out
    assert "fingerprint torch_oom, weight 0.95: 1 line" in out
    assert "line 4 | [rank3]: torch.OutOfMemoryError: »CUDA out of memory. Tried to allocate 1.00 GiB«" in out
    assert "fingerprint cuda_error_oom, weight 0.8: no hit" in out


def test_explain_names_the_exclude_that_vetoed(signatures_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "mps.log"
    log.write_text(
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
        "RuntimeError: MPS backend out of memory (MPS allocated: 1 GB)\n"
    )
    code, out, _ = run("explain", "cuda.oom", str(log), "--signatures", str(signatures_dir))
    assert code == 1
    assert "did not fire: every fingerprint hit was rejected" in out
    assert "does not count: torch_oom: vetoed by exclude 'MPS backend out of memory'" in out
    assert "exclude excludes[0]: 1 line" in out


def test_explain_when_nothing_matched_and_for_collateral(signatures_dir: Path, tmp_path: Path) -> None:
    from tests.support import SAMPLES

    code, out, _ = run(
        "explain", "nccl.watchdog_timeout", str(SAMPLES / "ddp-cuda-oom.log"), "--signatures", str(signatures_dir)
    )
    assert code == 0
    assert "collateral, an echo of cuda.oom" in out
    assert "The ranker chose cuda.oom (line 20) as the initiating failure." in out
    code, out, _ = run(
        "explain", "nccl.watchdog_timeout", str(SAMPLES / "torn-checkpoint.log"), "--signatures", str(signatures_dir)
    )
    assert code == 1 and "did not fire: no fingerprint matched any line" in out
    code, _, err = run(
        "explain", "cuda.nope", str(SAMPLES / "torn-checkpoint.log"), "--signatures", str(signatures_dir)
    )
    assert code == 2 and "no signature 'cuda.nope'" in err


def test_explain_names_the_missing_companion(signatures_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "import.log"
    log.write_text(
        "RuntimeError: Failed to import transformers.models.bloom.modeling_bloom because of the following error"
        " (look up to see its traceback):\nNo module named foo\n"
    )
    code, out, _ = run("explain", "env.extension_abi_mismatch", str(log), "--signatures", str(signatures_dir))
    assert code == 1
    assert "does not count: failed_import_undefined_symbol: companion" in out and "not within the window" in out
    assert "near failed_import_undefined_symbol.near[0]: no hit  (needed near failed_import_undefined_symbol)" in out
