"""`tracelore lint` reports each kind of broken signature, located, without stopping at the first."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from app.cli import main
from app.core.authoring.lint import CHECKS, FILE_CHECKS, Taxonomy, lint, load_taxonomy
from app.core.knowledge.loading import Library, load_library
from app.errors import LibraryError

from .conftest import signature


def good(id: str = "cuda.oom", **fields: Any) -> dict[str, Any]:
    data = signature(id, ("oom", r"CUDA out of memory\. Tried to allocate (?P<size>\S+)", 0.9)).model_dump(
        mode="json", exclude_defaults=True
    )
    data["layer"] = "memory"
    data["examples"] = {
        "match": [{"log": "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", "source": "test"}],
        "no_match": [{"log": "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "source": "test"}],
    }
    data["raise_sites"] = [
        {
            "project": "pytorch",
            "where": "c10/cuda/CUDACachingAllocator.cpp (malloc)",
            "versions": "all",
            "message": "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
        }
    ]
    data.update(fields)
    return data


def write(root: Path, data: dict[str, Any] | str, name: str = "cuda.oom", layer: str = "memory") -> Path:
    path = root / layer / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def messages(root: Path, **kwargs: Any) -> list[str]:
    return [f"{i.severity}: {i.message}" for i in lint(root, **kwargs).issues]


def test_a_sound_file_passes(tmp_path: Path) -> None:
    write(tmp_path, good())
    report = lint(tmp_path)
    assert report.issues == []
    assert report.summary() == "1 files, 0 errors, 0 warnings"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"fingerprints": []}, "fingerprints: Tuple should have at least 1 item"),
        ({"summary": None}, "summary: Input should be a valid string"),
        ({"severity": "bad"}, "severity: Input should be 'critical', 'error' or 'warning'"),
        ({"colour": "red"}, "colour: Extra inputs are not permitted"),
        ({"references": [{"title": "x", "url": "not a url"}]}, "references.0.url: String should match pattern"),
        ({"id": "cuda.other"}, "id 'cuda.other' does not match the file name"),
        ({"layer": "gpu"}, "layer 'gpu' does not match folder 'memory'"),
        ({"fingerprints": [{"name": "x", "regex": "(unclosed", "weight": 0.5}]}, "x: does not compile"),
        (
            {"fingerprints": [{"name": "x", "regex": "foo(?=bar)", "weight": 0.5}]},
            "x: not supported by the linear-time engine",
        ),
        ({"fingerprints": [{"name": "x", "regex": r"a\nb", "weight": 0.5}]}, "x: patterns match one line"),
        ({"fingerprints": [{"name": "x", "regex": r"(a+)+$", "weight": 0.5}]}, "x: catastrophic backtracking"),
        (
            {"fingerprints": [{"name": "x", "regex": "CUDA", "weight": 0.5, "message": "cuda"}]},
            "x: its `message` does not match its regex",
        ),
        ({"related": ["no.such"]}, "related: unknown id 'no.such'"),
        ({"consequence_of": ["cuda.oom"]}, "consequence_of: refers to itself"),
        (
            {"applies_to": {"torch": {"range": "about 2", "why": "w", "reference": "https://e.org"}}},
            "applies_to.torch: cannot read version range",
        ),
        (
            {"version_notes": [{"package": "torch", "range": ">=2.6", "text": "{rank}", "reference": "https://e.org"}]},
            "version_notes[0].text: only {version} can be filled",
        ),
        ({"fix": ["Use {nothing}."]}, "warning: fix uses {nothing} but no pattern captures it"),
        (
            {"fix": ["Free memory.", {"step": "Raise --mem.", "when": {"cluster": ["slurm"]}}]},
            "fix[1].when: 'cluster' is not a fact the engine reads",
        ),
        (
            {"fix": ["Free memory.", {"step": "Raise --mem.", "when": {"scheduler": ["pbs"]}}]},
            "fix[1].when.scheduler: 'pbs' is not a value it can be (slurm)",
        ),
        (
            {"fix": [{"step": "Raise --mem.", "when": {"scheduler": ["slurm"]}}]},
            "warning: every fix step has a condition",
        ),
        ({"verify": {"command": "run `nvidia-smi`", "explain": "shows it"}}, "verify.command: one command line"),
        (
            {"fingerprints": [{"name": "x", "regex": "CUDA (?P<what>oom)", "weight": 0.5, "means": "ran out: {what}"}]},
            "x: its `means` shows {what} as written",
        ),
        (
            {"examples": {"match": [{"log": "all good", "source": "t"}], "no_match": [{"log": "fine", "source": "t"}]}},
            "examples.match[0] (t): expected cuda.oom on top, got nothing",
        ),
        (
            {
                "examples": {
                    "match": [{"log": "CUDA out of memory. Tried to allocate 1 GiB", "source": "t"}],
                    "no_match": [{"log": "CUDA out of memory. Tried to allocate 2 GiB", "source": "n"}],
                }
            },
            "examples.no_match[0] (n): cuda.oom fired on a near miss",
        ),
    ],
)
def test_each_kind_of_break_is_reported(tmp_path: Path, change: dict[str, Any], expected: str) -> None:
    write(tmp_path, good(**change))
    found = messages(tmp_path)
    assert any(expected in m for m in found), found


def test_yaml_errors_and_duplicate_keys_are_located(tmp_path: Path) -> None:
    write(tmp_path, "id: a.b\nid: a.c\n", name="a.b", layer="a")
    write(tmp_path, "id: [unclosed\n", name="c.d", layer="c")
    issues = lint(tmp_path).issues
    assert [(i.path.name, i.line, i.message.split(":")[0]) for i in issues] == [
        ("a.b.yaml", 2, "invalid YAML"),
        ("c.d.yaml", 2, "invalid YAML"),
    ]
    assert "duplicate key 'id'" in issues[0].message


def test_schema_errors_point_at_the_line(tmp_path: Path) -> None:
    data = good()
    data["fingerprints"][0]["weight"] = 7
    path = write(tmp_path, data)
    (issue,) = lint(tmp_path).issues
    line = path.read_text().splitlines()[issue.line - 1]
    assert "weight: 7" in line
    assert str(issue).startswith(f"{path}:{issue.line}: error[schema]: fingerprints.0.weight")


def test_all_issues_are_collected_and_duplicates_found(tmp_path: Path) -> None:
    write(tmp_path, good())
    write(tmp_path, good(), layer="memory2")
    write(tmp_path, good(id="x.y", layer="x", title=None), name="x.y", layer="x")
    write(tmp_path, good(id="x.z", layer="x", summary=None), name="x.z", layer="x")
    found = messages(tmp_path)
    assert len([m for m in found if m.startswith("error")]) >= 3
    assert any("duplicate id 'cuda.oom'" in m for m in found)


def test_taxonomy_layers_and_coverage(tmp_path: Path) -> None:
    write(tmp_path, good())
    taxonomy = Taxonomy({"cuda.oom": "gpu", "host.oom_killed": "memory"})
    assert messages(tmp_path, taxonomy=taxonomy) == [
        "error: layer 'memory', but the taxonomy puts cuda.oom in 'gpu'",
        "warning: taxonomy id host.oom_killed has no signature file",
    ]


def test_a_candidate_class_needs_no_file_until_it_has_one(tmp_path: Path) -> None:
    """A failure seen in the wild with no signature yet is listed, not a gap; once written, its status goes."""
    write(tmp_path, good())
    taxonomy_file = tmp_path / "taxonomy.yaml"
    taxonomy_file.write_text(
        "memory:\n"
        "  - {id: cuda.oom, title: t, hint: h, status: candidate, seen: [https://e.org/1]}\n"
        "  - {id: npu.oom, title: t, hint: h, status: candidate, seen: [https://e.org/2]}\n"
    )
    taxonomy = load_taxonomy(taxonomy_file)
    assert taxonomy.candidates == {"cuda.oom", "npu.oom"}
    assert messages(tmp_path, taxonomy=taxonomy) == [
        "warning: cuda.oom has a signature now: drop its `status: candidate` in the taxonomy"
    ]


def test_load_library_raises_with_every_issue(tmp_path: Path) -> None:
    write(tmp_path, good(summary=None))
    write(tmp_path, good(id="x.y", layer="x", title=None), name="x.y", layer="x")
    with pytest.raises(LibraryError) as caught:
        load_library(tmp_path)
    assert len(caught.value.issues) == 2


def test_skip_by_check_id(tmp_path: Path) -> None:
    write(tmp_path, good(fix=["Use {nothing}."]))
    assert lint(tmp_path, skip=["placeholders"]).issues == []


def test_a_fact_not_every_fingerprint_captures_must_be_optional(tmp_path: Path, library: Library) -> None:
    """A text that names a fact one fingerprint cannot give would show `{name}` to a reader."""
    root = tmp_path / "signatures"
    shutil.copytree(library.paths["mps.oom"].parents[1], root)
    path = root / "memory" / "mps.oom.yaml"
    text = path.read_text()
    assert "[[; the failing request was {requested}]]" in text
    path.write_text(text.replace("[[; the failing request was {requested}]]", "; the failing request was {requested}"))
    report = lint(root)
    assert any("{requested}, which not every fingerprint captures" in i.message for i in report.issues)


def test_a_raise_site_whose_message_is_not_recognised_fails_the_lint(tmp_path: Path) -> None:
    sites = [
        {
            "project": "pytorch",
            "where": "c10/cuda/CUDACachingAllocator.cpp (malloc)",
            "versions": ">=1.0",
            "template": "CUDA out of memory. Tried to allocate {size}",
            "message": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
        },
        {"project": "pytorch", "where": "the XPU allocator", "versions": ">=2.5", "message": "XPU out of memory."},
    ]
    write(tmp_path, good(raise_sites=sites))
    report = lint(tmp_path)
    found = [f"{i.severity}: {i.message}" for i in report.issues]
    assert found == [
        "error: raise_sites[1] (pytorch, the XPU allocator): its message is not recognised as cuda.oom; got nothing"
    ]
    assert report.raise_sites == {"memory": (1, 1, 2)}
    assert "2 listed, for 1 of 1 signatures" in report.inventory()
    assert lint(tmp_path, skip=["raise_sites"]).issues == []


def test_a_failure_without_a_raise_site_inventory_fails_the_lint(tmp_path: Path) -> None:
    write(tmp_path, good(raise_sites=[]))
    assert "error: no raise_sites: list where upstream raises or logs this failure" in messages(tmp_path)
    write(tmp_path, good(raise_sites=[], role="benign"))
    assert not any("raise_sites" in m for m in messages(tmp_path))


def test_every_problem_says_which_check_found_it(tmp_path: Path) -> None:
    write(tmp_path, good(fix=["Use {nothing}."], related=["no.such"]))
    issues = lint(tmp_path).issues
    assert {(i.check, i.severity) for i in issues} >= {("placeholders", "warning"), ("references", "error")}
    assert all(i.check in CHECKS for i in issues)
    assert any(str(i).endswith("warning[placeholders]: fix uses {nothing} but no pattern captures it") for i in issues)


def test_every_check_is_listed_and_an_unknown_one_is_refused(tmp_path: Path) -> None:
    assert set(FILE_CHECKS) < set(CHECKS) and {"schema", "references", "taxonomy", "examples", "raise_sites"} <= set(
        CHECKS
    )
    with pytest.raises(ValueError, match="unknown check backtrack; the checks are schema, todos"):
        lint(tmp_path, skip=["backtrack"])
    listed = CliRunner().invoke(main, ["lint", "--list-checks"])
    assert listed.exit_code == 0
    assert [line.split()[0] for line in listed.output.splitlines()] == list(CHECKS)
    refused = CliRunner().invoke(main, ["lint", str(tmp_path), "--skip", "backtrack"])
    assert refused.exit_code == 2 and "unknown check backtrack" in refused.output
