"""Advice that fits the log: fix steps chosen by the facts the log states, verify commands apart from their words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.core.engine.advice import Setting, condition_words, fix_steps, holds, holds_one, setting_of, with_condition
from app.core.engine.diagnose import diagnose, diagnose_many
from app.core.knowledge.loading import Library
from app.core.models import Diagnosis, EnvFact, Environment
from app.core.rendering.registry import Links, render_report
from app.evaluation.corpus import load_corpus
from app.lsp.views import explain
from tests.core.conftest import library, signature
from tests.support import REPO

CASES = REPO / "tests" / "corpus" / "cases"


def _setting(**stated: set[str]) -> Setting:
    return Setting({key: frozenset(values) for key, values in stated.items()})


def _fact(name: str, value: str, line: int = 1) -> EnvFact:
    return EnvFact(name=name, value=value, line=line, text=f"{name} {value}")


@pytest.mark.parametrize(
    ("key", "values", "stated", "expected"),
    [
        # the log states one of the values / another value / nothing
        ("storage", ["redis"], {"storage": {"file", "redis"}}, True),
        ("storage", ["redis"], {"storage": {"file"}}, False),
        ("storage", ["redis"], {}, None),
        ("program", ["cpp"], {"program": {"python"}}, False),
        ("os", ["windows"], {"os": {"linux"}}, False),
        ("os", ["linux", "macos"], {"os": {"macos"}}, True),
        ("scheduler", ["slurm"], {"scheduler": {"slurm"}}, True),
        ("scheduler", ["slurm"], {}, None),
        # plain PyTorch frames do not rule out a framework above them (its frames may be cut) ...
        ("framework", ["lightning"], {"framework": {"pytorch"}}, None),
        # ... another framework does
        ("framework", ["lightning"], {"framework": {"pytorch", "transformers"}}, False),
        ("framework", ["transformers", "accelerate"], {"framework": {"accelerate", "pytorch"}}, True),
        ("framework", ["pytorch"], {"framework": {"jax"}}, False),
        # srun or mpirun may start torchrun; the elastic agent runs under torchrun, not deepspeed
        ("launcher", ["torchrun"], {"launcher": {"srun"}}, None),
        ("launcher", ["torchrun"], {"launcher": {"torch elastic agent"}}, None),
        ("launcher", ["deepspeed"], {"launcher": {"torch elastic agent"}}, False),
        ("launcher", ["torchrun"], {"launcher": {"deepspeed"}}, False),
        ("launcher", ["srun"], {"launcher": {"srun", "torchrun"}}, True),
        # a key no log states is never decided
        ("cluster", ["x"], {"cluster": {"y"}}, None),
    ],
)
def test_one_condition(key: str, values: list[str], stated: dict[str, set[str]], expected: bool | None) -> None:
    assert holds_one(key, values, _setting(**stated)) is expected


def test_a_whole_condition_fails_on_any_part_and_is_undecided_on_any_unknown() -> None:
    setting = _setting(os={"linux"}, scheduler={"slurm"})
    assert holds({"os": ["linux"], "scheduler": ["slurm"]}, setting) is True
    assert holds({"os": ["windows"], "scheduler": ["slurm"]}, setting) is False
    assert holds({"os": ["linux"], "storage": ["redis"]}, setting) is None
    assert holds({"os": ["windows"], "storage": ["redis"]}, setting) is False


def test_conditions_are_written_out() -> None:
    assert condition_words({"scheduler": ["slurm"]}) == "if the job runs under Slurm"
    assert (
        with_condition("Raise --mem.", {"framework": ["lightning", "deepspeed"], "os": ["linux"]})
        == "If the job uses Lightning or DeepSpeed and the job runs on Linux: Raise --mem."
    )
    assert with_condition("Free memory.", {}) == "Free memory."


def test_the_setting_comes_from_the_environment_facts() -> None:
    env = Environment(
        facts=[
            _fact("torch", "2.4.0"),
            _fact("framework", "lightning"),
            _fact("program", "python"),
            _fact("job_id", "4242"),
            _fact("launcher", "deepspeed"),
            _fact("macos", "14.2.1"),
            _fact("storage", "file"),
            _fact("python", "3.11"),  # a Python install: a C++ program linked against pip's libtorch has one too
        ]
    )
    assert setting_of(env).stated == {
        "framework": {"pytorch", "lightning", "deepspeed"},
        "program": {"python"},
        "os": {"macos"},
        "launcher": {"deepspeed"},
        "scheduler": {"slurm"},
        "storage": {"file"},
    }


SIG = signature(
    "storage.disk_full",
    ("enospc", r"No space left on device", 0.9),
    fix=[
        "Free space now.",
        {"step": "Set TrainingArguments(save_total_limit=2).", "when": {"framework": ["transformers"]}},
        {"step": "Set ModelCheckpoint(save_top_k=2).", "when": {"framework": ["lightning"]}},
        {"step": "Drain the node.", "when": {"scheduler": ["slurm"]}},
        {"step": "Keep the blob's length in {key}.", "when": {"storage": ["redis"]}},
    ],
    verify={"command": "df -h {mount}", "explain": "shows room for two checkpoints."},
)


def test_steps_that_fail_are_left_out_and_the_framework_shown_comes_first() -> None:
    setting = _setting(framework={"lightning", "pytorch"}, storage={"file"})
    assert fix_steps(SIG, {}, setting) == [
        "Free space now.",
        "If the job uses Lightning: Set ModelCheckpoint(save_top_k=2).",
        "If the job runs under Slurm: Drain the node.",
    ]
    # without Lightning named, plain PyTorch keeps both framework steps, in the file's order
    assert fix_steps(SIG, {"key": "ckpt:1"}, _setting(framework={"pytorch"}, storage={"redis"})) == [
        "Free space now.",
        "If the job uses Hugging Face Transformers: Set TrainingArguments(save_total_limit=2).",
        "If the job uses Lightning: Set ModelCheckpoint(save_top_k=2).",
        "If the job runs under Slurm: Drain the node.",
        "If what the job loads is kept in Redis: Keep the blob's length in ckpt:1.",
    ]


def test_a_step_for_the_framework_shown_comes_before_steps_for_frameworks_not_ruled_out() -> None:
    sig = signature(
        "storage.disk_full",
        ("enospc", r"No space left on device", 0.9),
        fix=[
            "Free space now.",
            {"step": "Lightning step.", "when": {"framework": ["lightning"]}},
            "Enlarge the volume.",
            {"step": "PyTorch step.", "when": {"framework": ["pytorch"]}},
            {"step": "Windows step.", "when": {"os": ["windows"]}},
        ],
    )
    assert fix_steps(sig, {}, _setting(framework={"pytorch"}, os={"linux"})) == [
        "Free space now.",
        "If the job uses PyTorch: PyTorch step.",
        "Enlarge the volume.",
        "If the job uses Lightning: Lightning step.",
    ]
    assert fix_steps(sig, {}, None) == [
        "Free space now.",
        "If the job uses Lightning: Lightning step.",
        "Enlarge the volume.",
        "If the job uses PyTorch: PyTorch step.",
        "If the job runs on Windows: Windows step.",
    ]


def test_a_diagnosis_shows_only_the_steps_that_fit_in_every_format() -> None:
    """A log read by torch.load from a file on Linux under Lightning; the one signature's steps fit it."""
    lib = library(SIG)
    log = (
        b"Traceback (most recent call last):\n"
        b'  File "/home/me/train.py", line 3, in <module>\n'
        b'    ckpt = torch.load("checkpoints/last.pt")\n'
        b'  File "/opt/venv/lib/python3.11/site-packages/lightning/pytorch/trainer/trainer.py", line 9, in fit\n'
        b"OSError: [Errno 28] No space left on device\n"
    )
    d = diagnose(log, lib, threads=1)
    facts = {(f.name, f.value) for f in d.environment.facts}
    assert {("program", "python"), ("storage", "file"), ("framework", "lightning"), ("os", "linux")} <= facts
    (c,) = d.candidates
    assert c.fix == [
        "Free space now.",
        "If the job uses Lightning: Set ModelCheckpoint(save_top_k=2).",
        "If the job runs under Slurm: Drain the node.",
    ]
    assert (c.verify_command, c.verify_explain) == ("df -h {mount}", "shows room for two checkpoints.")
    left_out = ("TrainingArguments", "blob's length")
    for fmt in ("text", "markdown", "json", "github", "sarif", "junit"):
        out = render_report(d, fmt, Links())
        assert "ModelCheckpoint" in out, fmt
        assert not any(text in out for text in left_out), fmt
    data = json.loads(render_report(d, "json", Links()))
    assert data["candidates"][0]["verify_command"] == "df -h {mount}"
    text = render_report(d, "text", Links()).splitlines()
    at = text.index("  verify: df -h {mount}")  # the command alone on its line, to copy
    assert text[at + 1].strip() == "shows room for two checkpoints."
    markdown = render_report(d, "markdown", Links())
    assert "```sh\ndf -h {mount}\n```\n\nshows room for two checkpoints." in markdown
    hover = explain(c, None)  # the language server's hover: the command alone in its block
    assert "**Verify:**\n```sh\ndf -h {mount}\n```\nshows room for two checkpoints." in hover


def test_issue_examples_on_real_logs(shipped_library: Library) -> None:
    """A checkpoint read from a file gets no Redis steps; one cached in Redis keeps them; a Python
    job's C++ abort gets no advice about linking libtorch; a log that shows neither keeps both, said."""

    def fix_of(case_id: str, sig_id: str) -> list[str]:
        d = _diagnose(CASES / case_id, shipped_library)
        return next(c for c in d.candidates if c.id == sig_id).fix

    from_file = fix_of("gen-ckpt-truncated-zip-central-dir", "checkpoint.truncated")
    assert from_file and not any("Redis" in step for step in from_file)
    from_redis = fix_of("gen-redis-cache-restart-compose", "checkpoint.truncated")
    assert any(step.startswith("If what the job loads is kept in Redis: ") for step in from_redis)
    python_job = fix_of("gh-pytorch-torchchat-709", "proc.cpp_abort")
    assert python_job and not any("libtorch" in step for step in python_job)
    unknown = fix_of("gen-proc-cpp-abort", "proc.cpp_abort")
    assert "If the program is written in C++ (libtorch): " in unknown[-1]


def _diagnose(case_dir: Path, library: Library) -> Diagnosis:
    logs = sorted(case_dir.glob("*.log")) or [case_dir / "log.txt"]
    return diagnose_many([(p.name, p) for p in logs], library, threads=1)


def test_no_corpus_case_is_shown_a_step_its_facts_contradict(shipped_library: Library) -> None:
    """Every corpus case: each candidate shows exactly the steps whose conditions its log does not
    contradict, and no format shows a step that was left out."""
    defects: list[str] = []
    left = 0
    for case in load_corpus(REPO / "tests" / "corpus"):
        d = diagnose_many([(p.name, p) for p in case.logs], shipped_library, threads=1)
        setting = setting_of(d.environment)
        dropped: list[str] = []
        for c in d.candidates:
            sig = shipped_library.signatures[c.id]
            kept = fix_steps(sig, c.facts, setting)
            if c.fix != kept:
                defects.append(f"{case.id} {c.id}: shows {c.fix}, fits {kept}")
            for text, when in sig.steps():
                if when and holds(when, setting) is False:
                    dropped.append(text[:60])
                    if any(text[:60] in step for step in c.fix):
                        defects.append(f"{case.id} {c.id}: shows {text!r}")
        if dropped:
            left += 1
            for fmt in ("text", "markdown", "json"):
                out = render_report(d, fmt, Links())
                defects += [f"{case.id} ({fmt}): shows {step!r}" for step in dropped if step in out]
    assert left > 10  # the conditions do leave steps out of real logs
    assert not defects, "\n".join(defects[:20])
