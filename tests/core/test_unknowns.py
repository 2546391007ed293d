"""Unknown failures as templates: real logs whose class is missing from a library cluster by failure."""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path

import pytest
import re2
import yaml

from app.core.authoring.lint import lint
from app.core.authoring.unknowns import draft_signature, fingerprint, template, unknown_lines
from app.core.engine.diagnose import diagnose_many
from app.core.knowledge.loading import Library, load_library
from app.evaluation.corpus import load_corpus
from tests.support import library_without

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
MISSING = ("tensor.shape_mismatch", "data.corrupt_image")


@pytest.fixture(scope="module")
def without(signatures_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped library without the classes in MISSING (their logs become unknown failures)."""
    return library_without(signatures_dir, MISSING, tmp_path_factory.mktemp("reduced"))


@pytest.fixture(scope="module")
def clusters(without: Path) -> dict[str, set[str]]:
    """Template -> the corpus cases (of the missing classes) whose diagnosis left it unexplained."""
    library = load_library(without)
    found: defaultdict[str, set[str]] = defaultdict(set)
    for case in load_corpus(CORPUS):
        if case.spec.expected in MISSING:
            d = diagnose_many([(p.name, p) for p in case.logs], library, threads=1)
            for u in unknown_lines(d):
                found[u.template].add(case.id)
    return found


@pytest.mark.parametrize(
    ("line", "shape"),
    [
        (
            "[rank1]: RuntimeError: mat1 and mat2 shapes cannot be multiplied (16x33 and 32x4)",
            "RuntimeError: mat1 and mat2 shapes cannot be multiplied (<DIMS> and <DIMS>)",
        ),
        (
            "2026-12-01 16:41:43,319 - ERROR - train - [rank0] training failed on cuda:3",
            "train - [rank<NUM>] training failed on cuda:<NUM>",  # the time and Python logging's level go
        ),
        (
            "OSError: image file is truncated (17 bytes not processed)",
            "OSError: image file is truncated (<NUM> bytes not processed)",
        ),
        (
            "ValueError: cannot open '/data/run_3/shard-0007.bin' at 0x7f3a9c on node12.cluster.local",
            "ValueError: cannot open <STR> at <HEX> on <HOST>",
        ),
        ("FileNotFoundError: /mnt/ckpt/step_100/model.pt", "FileNotFoundError: <PATH>"),
    ],
)
def test_a_template_masks_what_varies_between_runs(line: str, shape: str) -> None:
    assert template(line) == shape


def test_a_template_s_fingerprint_is_bounded_re2_and_matches_its_line() -> None:
    for line in (
        "[rank1]: RuntimeError: mat1 and mat2 shapes cannot be multiplied (16x33 and 32x4)",
        "ValueError: cannot open '/data/x.bin' (errno 5) on host node12.cluster.local",
        "AssertionError: assert 0x7f3a9c == 1024, got 3.5e-4",
    ):
        pattern = fingerprint(template(line))
        assert re2.compile(pattern).search(line), pattern
        assert "*" not in pattern and "+" not in pattern.replace("[-+]", "").replace("+-]", "]")


def test_real_logs_of_a_missing_class_cluster_by_failure(clusters: dict[str, set[str]]) -> None:
    mat = clusters["RuntimeError: mat1 and mat2 shapes cannot be multiplied (<DIMS> and <DIMS>)"]
    assert {"gen-dist-launch-shape-error", "gen-dist-spawn-shape-error", "gen-rt-shape-mat1-mat2"} <= mat
    # Two public threads and a generated run: the same truncated-image failure, whatever the byte count.
    truncated = clusters["OSError: image file is truncated (<NUM> bytes not processed)"]
    assert truncated == {"gen-data-corrupt-truncated-jpeg", "gh-media-smart-vedastr-72", "gh-pytorch-vision-138"}
    # Different failures stay apart.
    assert not mat & truncated


def test_a_draft_lints_but_for_its_todos_and_once_written_recognises_its_members(
    without: Path, tmp_path: Path, clusters: dict[str, set[str]]
) -> None:
    shape = "OSError: image file is truncated (<NUM> bytes not processed)"
    members = sorted(clusters[shape])
    library = load_library(without)
    lines = []
    for case in load_corpus(CORPUS):
        if case.id in members:
            d = diagnose_many([(p.name, p) for p in case.logs], library, threads=1)
            lines += [u.text for u in unknown_lines(d) if u.template == shape]
    near = ["RuntimeError: mat1 and mat2 shapes cannot be multiplied (16x33 and 32x4)"]
    text = draft_signature("data.corrupt_image", shape, lines[:3], near)
    root = tmp_path / "signatures"
    shutil.copytree(without, root)
    draft = root / "data" / "data.corrupt_image.yaml"
    draft.write_text(text)
    before = {(i.path.name, i.message) for i in lint(without).issues}  # what removing the classes broke
    found = [i for i in lint(root).issues if (i.path.name, i.message) not in before and i.severity == "error"]
    assert found and all(i.path == draft and "still TODO" in i.message for i in found)

    # A reviewer writes the knowledge: every TODO replaced by text.
    doc = yaml.safe_load(text)

    def written(value: object) -> object:
        if isinstance(value, str):
            return value.replace("TODO: ", "Written: ").replace(
                "https://example.invalid/TODO", "https://pillow.readthedocs.io/"
            )
        if isinstance(value, list):
            return [written(v) for v in value]
        if isinstance(value, dict):
            return {k: written(v) for k, v in value.items()}
        return value

    draft.write_text(yaml.safe_dump(written(doc), sort_keys=False))
    assert [i for i in lint(root).issues if i.severity == "error" and i.path == draft] == []
    grown: Library = load_library(root)
    for case in load_corpus(CORPUS):
        if case.id in members:
            d = diagnose_many([(p.name, p) for p in case.logs], grown, threads=1)
            assert "data.corrupt_image" in [c.id for c in d.candidates], case.id
