"""Advice that fits the log: the fix steps whose conditions the log's facts meet.

A signature's fix step may carry `when:` (`schema.FixStep`), keyed by the facts below, each read
from the job's own lines (`environment.read_environment`): the frameworks the log shows (their
versions, their frames in a traceback, their launcher), a Python program (a Python traceback: a
Python version or a site-packages path may belong to a C++ program linked against pip's libtorch),
the operating system its paths or errors name, the launcher, a Slurm job, and where a
checkpoint or blob was read from (a file path quoted to a loader, or Redis).

A condition holds when the log states one of its values; it fails when the log states the fact
with none of them (that step is left out of the diagnosis); when the log does not state the fact
it is undecided, and the step is shown with its condition written out. Every shown step with a
condition says it ("If the job runs under Slurm: ..."), as the encyclopedia does for every step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from app.core.engine.fill import fill
from app.core.knowledge.schema import Signature
from app.core.models import Environment

# Groups that state one value of a fact by matching at all, named <fact>_<value>: a Python
# traceback's header, an operating system's paths, where a checkpoint was read from (builtin.ENVIRONMENT).
_STATED = {
    "framework": ("pytorch",),
    "program": ("python",),
    "os": ("windows", "linux", "macos"),
    "storage": ("redis", "file"),
}
STATED_BY_MATCHING = {f"{fact}_{value}": (fact, value) for fact, values in _STATED.items() for value in values}


@dataclass(frozen=True)
class Condition:
    """One fact a fix step can be conditioned on: its values and how a reader is told of them."""

    values: Mapping[str, str]  # value -> how it reads
    clause: str  # "the job runs under {}": the values, joined by "or", fill the slot


CONDITIONS: dict[str, Condition] = {
    "framework": Condition(
        {
            "pytorch": "PyTorch",
            "transformers": "Hugging Face Transformers",
            "accelerate": "Accelerate",
            "deepspeed": "DeepSpeed",
            "lightning": "Lightning",
            "jax": "JAX",
            "tensorflow": "TensorFlow",
            "keras": "Keras",
            "vllm": "vLLM",
        },
        "the job uses {}",
    ),
    "program": Condition({"python": "Python", "cpp": "C++ (libtorch)"}, "the program is written in {}"),
    "os": Condition({"linux": "Linux", "macos": "macOS", "windows": "Windows"}, "the job runs on {}"),
    "launcher": Condition(
        {
            "torchrun": "torchrun",
            "torch.distributed.launch": "torch.distributed.launch",
            "srun": "srun",
            "mpirun": "mpirun",
            "deepspeed": "the deepspeed launcher",
            "accelerate launch": "accelerate launch",
        },
        "the job is launched with {}",
    ),
    "scheduler": Condition({"slurm": "Slurm"}, "the job runs under {}"),
    "storage": Condition({"file": "a file", "redis": "Redis"}, "what the job loads is kept in {}"),
}

# A framework's version line or its launcher shows the framework as surely as its frames.
_FRAMEWORK_FACTS = {
    "torch": "pytorch",
    "transformers": "transformers",
    "accelerate": "accelerate",
    "deepspeed": "deepspeed",
    "lightning": "lightning",
    "jax": "jax",
    "jaxlib": "jax",
    "tensorflow": "tensorflow",
    "keras": "keras",
    "vllm": "vllm",
}
_LAUNCHED_FRAMEWORK = {"deepspeed": "deepspeed", "accelerate launch": "accelerate"}
# Launchers that start other launchers (srun or mpirun running torchrun): seeing only them
# tells nothing about the launcher inside. The elastic agent runs under torchrun or launch.
_OUTER = frozenset({"srun", "mpirun"})
_INNER = frozenset({"torchrun", "torch.distributed.launch", "deepspeed", "accelerate launch"})
_AGENT = "torch elastic agent"


@dataclass(frozen=True)
class Setting:
    """The values the log states of each fact a condition can name."""

    stated: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def of(self, key: str) -> frozenset[str]:
        return self.stated.get(key, frozenset())


def setting_of(environment: Environment) -> Setting:
    """The condition facts an environment states."""
    stated: dict[str, set[str]] = {key: set() for key in CONDITIONS}
    for f in environment.facts:
        if f.name in ("framework", "program", "os", "storage", "launcher"):
            stated[f.name].add(f.value)
        if f.name in _FRAMEWORK_FACTS:
            stated["framework"].add(_FRAMEWORK_FACTS[f.name])
        if f.name == "macos":
            stated["os"].add("macos")
        if f.name == "job_id":
            stated["scheduler"].add("slurm")
        if f.name == "launcher":
            if f.value == "srun":
                stated["scheduler"].add("slurm")
            if f.value in _LAUNCHED_FRAMEWORK:
                stated["framework"].add(_LAUNCHED_FRAMEWORK[f.value])
    return Setting({key: frozenset(values) for key, values in stated.items() if values})


def holds_one(key: str, values: Sequence[str], setting: Setting) -> bool | None:
    """Whether one condition holds for the log: True, False, or None when the log does not tell."""
    stated = setting.of(key)
    wanted = set(values)
    if key not in CONDITIONS or not stated:
        return None
    if stated & wanted:
        return True
    if key == "framework" and not stated - {"pytorch"}:
        return None  # plain PyTorch frames do not rule out a framework above it whose frames were cut
    if key == "launcher" and wanted & _INNER and stated <= _OUTER | {_AGENT}:
        # srun or mpirun may start the launcher asked for; the elastic agent runs under torchrun or launch
        if _AGENT not in stated or wanted & {"torchrun", "torch.distributed.launch"}:
            return None
    return False


def holds(when: Mapping[str, Sequence[str]], setting: Setting) -> bool | None:
    """Whether a step's whole condition holds: False if any part fails, None if any is undecided."""
    results = [holds_one(key, values, setting) for key, values in when.items()]
    if any(r is False for r in results):
        return False
    return None if any(r is None for r in results) else True


def condition_words(when: Mapping[str, Sequence[str]]) -> str:
    """A condition as a reader is told it: 'if the job runs under Slurm'."""
    clauses = []
    for key, values in when.items():
        condition = CONDITIONS.get(key)
        if condition is None:
            clauses.append(f"{key} is {' or '.join(values)}")
            continue
        shown = " or ".join(condition.values.get(v, v) for v in values)
        clauses.append(condition.clause.format(shown))
    return "if " + " and ".join(clauses)


def with_condition(text: str, when: Mapping[str, Sequence[str]]) -> str:
    """A step with its condition written before it: 'If the job runs under Slurm: ...'."""
    if not when:
        return text
    said = condition_words(when)
    return f"{said[0].upper()}{said[1:]}: {text}"


def fix_steps(sig: Signature, facts: Mapping[str, str], setting: Setting | None) -> list[str]:
    """The fix steps a diagnosis shows: those whose condition does not fail for the log, facts
    filled in, each condition written out; steps for a framework the log shows come before the
    other frameworks' steps (in the slots those steps held). Without a setting, every step."""
    kept: list[tuple[str, bool | None, bool]] = []  # text, whether it holds, framework-bound
    for text, when in sig.steps():
        verdict = holds(when, setting) if setting is not None and when else None
        if verdict is False:
            continue
        kept.append((with_condition(fill(text, dict(facts)), when), verdict, "framework" in when))
    slots = [i for i, (_, _, bound) in enumerate(kept) if bound]
    ordered = sorted((kept[i] for i in slots), key=lambda k: k[1] is not True)
    for i, step in zip(slots, ordered, strict=True):
        kept[i] = step
    return [text for text, _, _ in kept]


def verify_parts(sig: Signature, facts: Mapping[str, str]) -> tuple[str, str | None, str]:
    """The verify text as one sentence, its command (None when written as prose) and its explanation."""
    command, explain = sig.verify_parts()
    explain = fill(explain, dict(facts))
    if command is None:
        return explain, None, explain
    command = fill(command, dict(facts))
    return f"`{command}` {explain}", command, explain
