"""Report formats for CI: SARIF checked against the official schema, JUnit read by a JUnit reader,
GitHub workflow commands escaped as the runner unescapes them, Markdown and text with file provenance."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from junitparser import Failure, JUnitXml, Properties, Property, TestCase

from app.core.engine.diagnose import diagnose, diagnose_many
from app.core.knowledge.loading import Library
from app.core.models import Diagnosis
from app.core.rendering.ci import render_github, render_junit, render_sarif, workflow_command
from app.core.rendering.text import render_markdown, render_text
from tests.support import SAMPLES

SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())
HEALTHY = b"{'loss': 1.25, 'learning_rate': 5e-05, 'epoch': 0.5}\n" * 20


@pytest.fixture(scope="module")
def cascade(library: Library) -> Diagnosis:
    """Two files of one job: a multi-rank OOM cascade and a torn checkpoint."""
    return diagnose_many(
        [("ranks/ddp-cuda-oom.log", SAMPLES / "ddp-cuda-oom.log"), ("torn, 100%.log", SAMPLES / "torn-checkpoint.log")],
        library,
    )


@pytest.fixture(scope="module")
def healthy(library: Library) -> Diagnosis:
    return diagnose(HEALTHY, library, name="ok.log")


def validate_sarif(data: object) -> None:
    validator = jsonschema.Draft4Validator(SCHEMA, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.path))
    assert [f"{list(e.path)}: {e.message}" for e in errors] == []


def test_sarif_is_valid_with_one_rule_per_signature_and_one_result_per_candidate(cascade: Diagnosis) -> None:
    sarif = render_sarif(
        cascade, tool_version="9.9", base_url="https://tl.example.org/", permalink="https://tl.example.org/d/x"
    )
    validate_sarif(sarif)
    run = sarif["runs"][0]  # type: ignore[index]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == list(dict.fromkeys(c.id for c in cascade.candidates))
    oom = rules[0]
    assert oom["helpUri"] == "https://tl.example.org/failures/cuda.oom"
    assert "Fix:" in oom["help"]["text"] and "**Verify:**" in oom["help"]["markdown"]
    results = run["results"]
    assert len(results) == len(cascade.candidates)
    for result, c in zip(results, cascade.candidates, strict=True):
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"] == c.id
        region = result["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] == c.line
        assert result["properties"]["role"] == c.role
    first = results[0]["locations"][0]["physicalLocation"]
    assert first["artifactLocation"]["uri"] == "ranks/ddp-cuda-oom.log"
    assert "CUDA out of memory" in first["region"]["snippet"]["text"]
    assert results[0]["level"] == "error"
    assert {r["level"] for r in results if r["properties"]["role"] == "collateral"} == {"note"}
    torn = next(r for r in results if r["ruleId"] == "checkpoint.truncated")
    assert torn["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "torn%2C%20100%25.log"
    assert run["properties"]["permalink"] == "https://tl.example.org/d/x"


def test_sarif_of_a_healthy_log_and_of_stdin_is_valid(library: Library, healthy: Diagnosis) -> None:
    sarif = render_sarif(healthy, tool_version="1")
    validate_sarif(sarif)
    assert sarif["runs"][0]["results"] == []  # type: ignore[index]
    stdin = diagnose((SAMPLES / "oom-killed.log").read_bytes(), library, name="<stdin>")
    sarif = render_sarif(stdin, tool_version="1")
    validate_sarif(sarif)
    assert "helpUri" not in sarif["runs"][0]["tool"]["driver"]["rules"][0]  # type: ignore[index]


def _properties(case: TestCase) -> dict[str, str]:
    props = next(case.iterchildren(Properties), None)
    return {p.name: p.value for p in props.iterchildren(Property)} if props is not None else {}


def test_junit_has_one_failing_case_per_failure_that_ended_the_run(tmp_path: Path, cascade: Diagnosis) -> None:
    path = tmp_path / "report.xml"
    path.write_text(render_junit(cascade, permalink="https://tl.example.org/d/x"))
    xml = JUnitXml.fromfile(str(path))
    suites = list(xml)
    assert len(suites) == 1
    suite = suites[0]
    cases = list(suite)
    failing = [c for c in cascade.candidates if c.episode == "terminal" and c.role != "collateral"]
    assert suite.failures == len(failing) == len([c for c in cases if c.is_failure])
    assert suite.tests == len(cases)
    oom = cases[0]
    assert oom.name == "cuda.oom: CUDA out of memory" and oom.classname == "tracelore.memory"
    failure = oom.result[0]
    assert isinstance(failure, Failure) and failure.type == "cuda.oom"
    assert "ranks/ddp-cuda-oom.log:20 |" in failure.text and "Verify:" in failure.text
    props = _properties(oom)
    assert props["role"] == "initiating" and props["fact.requested"] == "3.91 GiB"
    collateral = {c.id for c in cascade.candidates if c.role == "collateral"}
    assert collateral and {k.removeprefix("collateral.") for k in props if k.startswith("collateral.")} == collateral
    suite_props = {p.name: p.value for p in suite.properties()}
    assert suite_props["permalink"] == "https://tl.example.org/d/x"


def test_junit_of_a_healthy_log_passes(tmp_path: Path, healthy: Diagnosis) -> None:
    path = tmp_path / "report.xml"
    path.write_text(render_junit(healthy))
    suite = next(iter(JUnitXml.fromfile(str(path))))
    assert (suite.tests, suite.failures) == (1, 0)
    assert next(iter(suite)).is_passed


def _unescape_data(value: str) -> str:
    return value.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def _unescape_property(value: str) -> str:
    return _unescape_data(value.replace("%3A", ":").replace("%2C", ","))


COMMAND = re.compile(r"^::(error|warning|notice)(?: ([^:]*))?::(.*)$")


def parse_command(line: str) -> tuple[str, dict[str, str], str]:
    """Read a workflow command the way the runner does (split on ',' and the first '=')."""
    match = COMMAND.match(line)
    assert match, line
    props = dict(p.split("=", 1) for p in match[2].split(",")) if match[2] else {}
    return match[1], {k: _unescape_property(v) for k, v in props.items()}, _unescape_data(match[3])


def test_workflow_commands_escape_what_the_runner_unescapes() -> None:
    message = "50% done\r\nnext: a, b"
    line = workflow_command("error", message, file="logs/a,b:c.log", line=3, title="x: 100%, y")
    assert "\n" not in line and "\r" not in line
    kind, props, text = parse_command(line)
    assert (kind, text) == ("error", message)
    assert props == {"file": "logs/a,b:c.log", "line": "3", "title": "x: 100%, y"}
    assert workflow_command("notice", "m", file=None, line=None) == "::notice::m"


def test_github_annotations_point_at_the_log_lines(cascade: Diagnosis, healthy: Diagnosis) -> None:
    lines = render_github(cascade, base_url="https://tl.example.org").splitlines()
    assert len(lines) == len(cascade.candidates)
    commands = [parse_command(line) for line in lines]
    kind, props, text = commands[0]
    assert kind == "error" and props["file"] == "ranks/ddp-cuda-oom.log" and props["line"] == "20"
    assert props["title"].startswith("CUDA out of memory [cuda.oom] (initiating")
    assert "Fix:" in text and "More: https://tl.example.org/failures/cuda.oom" in text
    assert {k for k, _, _ in commands[1:]} <= {"error", "notice", "warning"}
    assert {k for (k, _, _), c in zip(commands, cascade.candidates, strict=True) if c.role == "collateral"} == {
        "notice"
    }
    kind, props, text = parse_command(render_github(healthy).strip())
    assert kind == "notice" and text.startswith("No error found: the log stops on training progress")


def test_markdown_has_permalink_provenance_and_safe_fences(library: Library, cascade: Diagnosis) -> None:
    md = render_markdown(cascade, permalink="https://tl.example.org/d/abc", base_url="https://tl.example.org")
    assert md.startswith("## Tracelore diagnosis\n\nFull diagnosis: https://tl.example.org/d/abc\n")
    assert "### Initiating failure: [CUDA out of memory](https://tl.example.org/failures/cuda.oom) `cuda.oom`" in md
    assert "ranks/ddp-cuda-oom.log:20 | [rank5]:torch.OutOfMemoryError" in md
    assert "torn, 100%.log:13 | RuntimeError" in md
    assert "<details><summary>Collateral" in md
    # Without a service address there is no link that would point into the forge.
    assert "](/failures/" not in render_markdown(cascade)
    # A log line with a code fence in it cannot close the block early.
    log = b"```\n" + (SAMPLES / "oom-killed.log").read_bytes().replace(b"python invoked", b"py|thon ``` invoked")
    md = render_markdown(diagnose(log, library, name="x.log"))
    assert "````text" in md


def test_text_groups_spans_per_line_and_names_files(cascade: Diagnosis) -> None:
    text = render_text(cascade)
    evidence = [line for line in text.splitlines() if "OutOfMemoryError" in line]
    assert len(evidence) == 1  # four patterns hit that line: shown once, all spans marked
    assert evidence[0].strip().startswith("ranks/ddp-cuda-oom.log:20 | ")
    assert evidence[0].count("»") >= 3 and evidence[0].count("»") == evidence[0].count("«")
    assert "torn, 100%.log:14 | ERROR job 88412" in text
