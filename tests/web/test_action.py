"""The GitHub Action (action.yml): its script steps run as the runner runs them, on a sample failing log,
locally and against a real server, with GITHUB_STEP_SUMMARY, GITHUB_OUTPUT and GITHUB_PATH in a temp folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.support import REPO, SAMPLES, LiveServer
from tests.test_formats import parse_command

ACTION = yaml.safe_load((REPO / "action.yml").read_text())
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@dataclass
class StepsRun:
    code: int
    stdout: str
    stderr: str
    summary: str
    outputs: dict[str, str]


def evaluate(value: str, inputs: dict[str, str]) -> str:
    """The expressions the action uses: inputs.NAME and github.action_path."""

    def one(match: re.Match[str]) -> str:
        expr = match[1]
        if expr == "github.action_path":
            return str(REPO)
        name = expr.removeprefix("inputs.")
        assert expr.startswith("inputs.") and name in ACTION["inputs"], expr
        return inputs.get(name, ACTION["inputs"][name].get("default", ""))

    return EXPRESSION.sub(one, value)


def run_action(tmp: Path, inputs: dict[str, str], *, cwd: Path) -> StepsRun:
    """Run every step of the composite action with bash, as `shell: bash` does on a runner."""
    summary, outputs, path_file = tmp / "summary.md", tmp / "output.txt", tmp / "path.txt"
    for f in (summary, outputs, path_file):
        f.write_text("")
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("TRACELORE_", "GITHUB_"))
    }  # a clean runner environment
    env |= {
        "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '')}",  # `install: false` finds this checkout's tracelore
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_OUTPUT": str(outputs),
        "GITHUB_PATH": str(path_file),
        "GITHUB_ACTION_PATH": str(REPO),
        "RUNNER_TEMP": str(tmp / "runner-temp"),
    }
    (tmp / "runner-temp").mkdir(exist_ok=True)
    code, out, err = 0, "", ""
    for step in ACTION["runs"]["steps"]:
        assert step["shell"] == "bash" and not EXPRESSION.search(step["run"]), "expressions only in env"
        step_env = env | {k: evaluate(str(v), inputs) for k, v in step.get("env", {}).items()}
        script = tmp / "step.sh"
        script.write_text(step["run"])
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            env=step_env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=300,
        )
        code, out, err = done.returncode, out + done.stdout, err + done.stderr
        if code:
            break
    values = dict(line.split("=", 1) for line in outputs.read_text().splitlines() if "=" in line)
    return StepsRun(code, out, err, summary.read_text(), values)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    (ws / "logs").mkdir(parents=True)
    (ws / "logs" / "rank5.log").write_bytes((SAMPLES / "ddp-cuda-oom.log").read_bytes())
    (ws / "logs" / "launcher.log").write_text("starting 8 workers\n")
    return ws


def test_action_declares_what_it_uses() -> None:
    assert ACTION["runs"]["using"] == "composite"
    assert set(ACTION["inputs"]) >= {"logs", "server", "api-key", "fail-on", "top"}
    assert ACTION["inputs"]["logs"]["required"] is True
    for name, output in ACTION["outputs"].items():
        assert output["value"] == f"${{{{ steps.diagnose.outputs.{name} }}}}"


def test_action_diagnoses_locally_writes_the_summary_and_annotates(tmp_path: Path, workspace: Path) -> None:
    result = run_action(tmp_path, {"logs": "logs/*.log", "install": "false"}, cwd=workspace)
    assert result.code == 0, result.stderr  # fail-on never: the job has failed already
    assert result.summary.startswith("## Tracelore diagnosis")
    assert "### Initiating failure: CUDA out of memory `cuda.oom`" in result.summary
    assert "logs/rank5.log:20 | [rank5]:torch.OutOfMemoryError" in result.summary
    commands = [parse_command(line) for line in result.stdout.splitlines() if line.startswith("::")]
    kind, props, text = commands[0]
    assert (kind, props["file"], props["line"]) == ("error", "logs/rank5.log", "20")
    assert "Fix:" in text
    assert result.outputs["initiating"] == "cuda.oom"
    assert result.outputs["exit-code"] == "0"  # per fail-on: never
    assert Path(result.outputs["report"]).read_text() == result.summary


def test_action_fails_the_step_only_when_asked(tmp_path: Path, workspace: Path) -> None:
    result = run_action(tmp_path, {"logs": "logs/**/*.log", "install": "false", "fail-on": "likely"}, cwd=workspace)
    assert result.code == 1 and result.outputs["initiating"] == "cuda.oom"


def test_action_without_logs_warns_and_passes(tmp_path: Path, workspace: Path) -> None:
    result = run_action(tmp_path, {"logs": "missing/*.log", "install": "false"}, cwd=workspace)
    assert result.code == 0
    assert "::warning title=Tracelore::no file matches missing/*.log" in result.stdout
    assert "No log files matched" in result.summary


def test_action_in_server_mode_links_the_permalink(tmp_path: Path, workspace: Path, live: LiveServer) -> None:
    inputs = {"logs": "logs/rank5.log", "install": "false", "server": live.url, "api-key": ""}
    result = run_action(tmp_path, inputs, cwd=workspace)
    assert result.code == 0, result.stderr
    permalink = result.outputs["permalink"]
    assert permalink.startswith(f"{live.url}/d/")
    assert f"Full diagnosis: {permalink}" in result.summary
    assert "Sending the evidence of logs/rank5.log" in result.stderr
    assert result.outputs["initiating"] == "cuda.oom"
    # Several files (one per rank) go to the server together, as one job with one permalink.
    result = run_action(tmp_path, {**inputs, "logs": "logs/*.log"}, cwd=workspace)
    assert result.code == 0 and result.outputs["exit-code"] == "0", result.stderr
    assert result.outputs["initiating"] == "cuda.oom"
    assert result.outputs["permalink"].startswith(f"{live.url}/d/") and result.outputs["permalink"] != permalink
    assert "Sending 2 files, the evidence of each" in result.stderr
