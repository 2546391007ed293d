"""The job's environment, read from the lines the one matching pass picked (no second read).

The engine's `version` patterns (`builtin.ENVIRONMENT`) name their groups after facts:
versions (PyTorch, its CUDA, the driver and the CUDA it supports, NCCL, cuDNN, Python,
libraries), GPUs, topology, launcher and Slurm job. Each fact keeps its line. Conflicts are
reported only when lines of the log prove them: a PyTorch built for a newer CUDA major than
the driver supports, different versions or GPU models on different ranks, a library version
the framework shown does not support.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from app.core.engine.advice import STATED_BY_MATCHING
from app.core.engine.file_scan import FileScan, LineHit
from app.core.engine.fill import fill
from app.core.engine.job import picked_lines
from app.core.engine.versions import parse, same_version, satisfies
from app.core.knowledge.loading import Library
from app.core.knowledge.schema import Signature
from app.core.models import EnvConflict, EnvFact, Environment

MAX_FACTS = 80  # distinct facts kept: a pip freeze of every package is not the point

# Group name -> fact name, where they differ.
_RENAMED = {"python_path": "python", "smi_gpu": "gpu", "gpu_memory_mib": "gpu_memory", "torch_release": "torch"}
_SKIPPED = {
    *("gpu_index", "smi_index", "pkg", "pkg_version", "pkg_release", "cuda_driver_code", "launcher"),
    "nccl_rank",  # a process's rank in its communicator: app/core/engine/nccl_ranks.py
}

# Facts whose values differ across ranks only when the ranks really ran different software.
VERSIONED = (
    "torch",
    "cuda",
    "cuda_driver",
    "driver",
    "nccl",
    "cudnn",
    "python",
    "transformers",
    "accelerate",
    "deepspeed",
    "vllm",
    "numpy",
    "lightning",
    "datasets",
    "jax",
    "jaxlib",
    "tensorflow",
    "keras",
    "rocm",
    "macos",
)

# A version quoted in a requirement is not the one installed: "requires torch 2.1 or later".
_QUOTED = re.compile(
    r"(?i)requir|\bneed|upgrad|downgrad|\binstall|support|expect|compatib|at least|minimum|"
    r"or (?:later|higher|newer|above|greater)|[<>]=?|~=|\bbuild|compiled"  # ... or what something was built against
)
# "In PyTorch 2.6, we changed the default ...": a release named in prose, not the one running.
_PROSE_BEFORE = re.compile(r"(?i)\b(?:in|since|from|before|after|until|as of|prior to|starting with)\s*$")
_GENERIC = frozenset({"torch", "package", "python"})  # patterns whose match may sit in prose

_LAUNCHERS = (
    ("torchrun", "torchrun"),
    ("torch.distributed.launch", "torch.distributed.launch"),
    ("torch/distributed/launch", "torch.distributed.launch"),
    ("torch.distributed.run", "torchrun"),
    ("torch.distributed.elastic", "torch elastic agent"),
    ("srun", "srun"),
    ("mpirun", "mpirun"),
    ("Primary job", "mpirun"),
    ("deepspeed", "deepspeed"),
    ("accelerate", "accelerate launch"),
)

# The oldest Linux driver of each CUDA major (minor version compatibility covers the rest of
# the major): NVIDIA's table "CUDA Toolkit 11.x, 12.x, and 13.x Minimum and Maximum Required
# Driver Versions", https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html
# (13.x >= 580, 12.x >= 525, 11.x >= 450.80.02 per its note on CUDA 11.0).
_DRIVER_FOR_MAJOR = {11: (450, 80, 2), 12: (525,), 13: (580,)}


# Distributions of one package under several names: the fact is the package.
_PACKAGE_NAMES = {
    "pytorch_lightning": "lightning",
    "tensorflow_gpu": "tensorflow",
    "tensorflow_cpu": "tensorflow",
    "tensorflow_macos": "tensorflow",
    "tf_keras": "keras",
    "paddlepaddle_gpu": "paddlepaddle",
}


def _package(name: str) -> str:
    name = name.lower().replace("-", "_")
    return _PACKAGE_NAMES.get(name, name)


def _cuda_of_local(torch: str) -> str | None:
    """The CUDA a PyTorch wheel was built for, from its local version: `+cu121` is 12.1."""
    m = re.search(r"\+cu(\d{2,3})\b", torch)
    return f"{m[1][:-1]}.{m[1][-1]}" if m else None


def _quoted(name: str, hit: LineHit) -> bool:
    if name not in _GENERIC:
        return False
    text = hit.line.text
    start, end = hit.span
    before = text[max(hit.line.content_start, start - 50) : start]
    return bool(_QUOTED.search(before) or _PROSE_BEFORE.search(before) or _QUOTED.search(text[end : end + 30]))


def _values(name: str, hit: LineHit) -> Iterable[tuple[str, str]]:
    """The (fact, value) pairs one environment line states."""
    groups = {k: v.strip() for k, v in hit.groups.items() if v and v.strip()}
    if _quoted(name, hit):
        return
    for key, value in groups.items():
        if key in _SKIPPED:
            continue
        if key in STATED_BY_MATCHING:
            yield STATED_BY_MATCHING[key]
            continue
        if key == "framework":  # a traceback frame's package directory
            value = _package(value)
        fact = _RENAMED.get(key, key)
        if key == "gpu_memory_mib":
            value = f"{value} MiB"
        yield fact, value
    if "pkg" in groups and (version := groups.get("pkg_version") or groups.get("pkg_release")):
        yield _package(groups["pkg"]), version
    if (cuda := _cuda_of_local(groups.get("torch") or groups.get("torch_release") or "")) is not None:
        yield "cuda", cuda
    if "cuda_driver_code" in groups:  # CUDA's driver API version: 11040 is 11.4
        code = int(groups["cuda_driver_code"])
        yield "cuda_driver", f"{code // 1000}.{code % 1000 // 10}"
    if "launcher" in groups:
        shown = groups["launcher"]
        yield "launcher", next(v for k, v in _LAUNCHERS if k in shown)


def _fact(name: str, value: str, hit: LineHit) -> EnvFact:
    line = hit.line
    return EnvFact(
        name=name, value=value, line=line.no, file=line.file, rank=line.rank, host=line.host, text=line.text[:500]
    )


def read_environment(library: Library, scans: Sequence[FileScan]) -> Environment:
    """The environment facts of a job's scans (in job order) and the conflicts they prove."""
    rule_name = {idx: library.rules[idx][0].name for idx in library.kinds["version"]}
    several = len(scans) > 1
    facts: list[EnvFact] = []
    seen: set[tuple[str, str]] = set()
    for scan in scans:
        ordered = sorted(
            ((hit, rule_name[idx]) for idx in rule_name if (ph := scan.hits.get(idx)) for hit in ph.first),
            key=lambda h: h[0].line.no,
        )
        gpu_rows: dict[str, LineHit] = {}
        for hit, name in ordered:
            if name == "smi_gpu":
                gpu_rows.setdefault(hit.groups.get("smi_index", ""), hit)
            for fact, value in _values(name, hit):
                key = (fact, _normal(fact, value))
                if key not in seen and len(facts) < MAX_FACTS:
                    seen.add(key)
                    facts.append(_fact(fact, value, hit))
        if gpu_rows:  # the rows of one nvidia-smi table: the GPUs that node showed
            first = min(gpu_rows.values(), key=lambda h: h.line.no)
            if ("gpus", str(len(gpu_rows))) not in seen:
                seen.add(("gpus", str(len(gpu_rows))))
                facts.append(_fact("gpus", str(len(gpu_rows)), first))
    facts = _specific_launcher(facts)
    # Validated facts and conflicts, in new lists: validating them again would only build the schema.
    return Environment.model_construct(
        facts=facts,
        conflicts=[
            *_driver_conflicts(facts, several),
            *_rank_conflicts(facts, several),
            *_support_conflicts(facts, several),
        ],
    )


def on_one_node(environment: Environment, scans: Sequence[FileScan]) -> bool:
    """Whether nothing in the job's lines shows it on more than one node.

    A node count above one (torchrun's --nnodes, its agent's group_world_size, Slurm's), a world
    size or a rank beyond the ranks one node runs (--nproc_per_node), or lines from two hosts.
    """

    def stated(name: str) -> list[int]:
        return [int(f.value) for f in environment.facts if f.name == name and f.value.isdigit()]

    if any(n > 1 for n in stated("nodes")):
        return False
    lines = [line for scan in scans for line in picked_lines(scan)]
    if per_node := stated("ranks_per_node"):
        most = max(per_node)
        if any(w > most for w in stated("world_size")) or any(
            line.rank is not None and line.rank >= most for line in lines
        ):
            return False
    hosts = {line.host for line in lines if line.host} | {f.host for f in environment.facts if f.host}
    return len(hosts) <= 1


def _normal(fact: str, value: str) -> str:
    if fact == "gpu":  # "NVIDIA A100-SXM4-80GB" and "A100 SXM4 80GB" name one model
        bare: str = re.sub(r"^(?:NVIDIA|Tesla)\s+", "", value, flags=re.I)
        return "".join(bare.replace("-", " ").replace("_", " ").split()).lower()
    return value


def _specific_launcher(facts: list[EnvFact]) -> list[EnvFact]:
    """torchrun and torch.distributed.launch both run the elastic agent: name it only when alone."""
    named = {f.value for f in facts if f.name == "launcher"}
    if "torch elastic agent" in named and named & {"torchrun", "torch.distributed.launch"}:
        return [f for f in facts if not (f.name == "launcher" and f.value == "torch elastic agent")]
    return facts


def where(f: EnvFact, several: bool = False) -> str:
    """`line 3, rank 0`; with the file when the job has several (`rank0.log:3, rank 0`), and the
    host a prefix names when no rank does (`line 9, host node2`)."""
    parts = [f"{f.file}:{f.line}" if several and f.file else f"line {f.line}"]
    if f.rank is not None:
        parts.append(f"rank {f.rank}")
    elif f.host is not None:
        parts.append(f"host {f.host}")
    return ", ".join(parts)


def _driver_conflicts(facts: list[EnvFact], several: bool) -> list[EnvConflict]:
    """PyTorch built for a CUDA major newer than the driver runs (minor versions are compatible)."""
    out: list[EnvConflict] = []
    for cuda in (f for f in facts if f.name == "cuda"):
        built = parse(cuda.value)
        if built is None:
            continue
        drivers = [f for f in facts if f.name == "cuda_driver"] + [f for f in facts if f.name == "driver"]
        for driver in drivers:  # the CUDA the driver states first, else its version
            have = parse(driver.value)
            if have is None:
                continue
            major = built.release[0]
            if driver.name == "cuda_driver":
                too_old = have.release[0] < major
                said = f"the driver supports CUDA up to {driver.value} ({where(driver, several)})"
            else:
                needed = _DRIVER_FOR_MAJOR.get(major)
                too_old = needed is not None and have.release < needed
                said = (
                    f"driver {driver.value} ({where(driver, several)}) is older than "
                    f"{'.'.join(map(str, needed or ()))}, the oldest driver for CUDA {major}"
                )
            if too_old and not any(c.facts[0] is cuda for c in out):  # once per PyTorch line
                out.append(
                    EnvConflict(
                        kind="cuda_driver",
                        summary=f"PyTorch is built for CUDA {cuda.value} ({where(cuda, several)}) but {said}: "
                        f"CUDA {major} needs a newer driver, or a PyTorch built for the driver's CUDA",
                        facts=[cuda, driver],
                    )
                )
    return out


# A library version the installed framework does not support: (library, its range, framework,
# the framework's range, why). PyTorch 2.3.0 is the first release built for NumPy 2
# (pytorch/pytorch#107302; pytorch/pytorch#132179: "PyTorch 2.3.0 is the first version that
# supports NumPy 2.0"); older wheels fail on `.numpy()`/`from_numpy` with NumPy 2.
_UNSUPPORTED = (
    ("numpy", ">=2", "torch", "<2.3", "PyTorch supports NumPy 2 from 2.3.0 on: upgrade torch or pin numpy<2"),
)


def _support_conflicts(facts: list[EnvFact], several: bool) -> list[EnvConflict]:
    """A library the log shows at a version the framework the log shows does not support."""
    versions = versions_of(Environment.model_construct(facts=facts))
    out = []
    for lib, lib_range, framework, framework_range, why in _UNSUPPORTED:
        have, host = versions.get(lib), versions.get(framework)
        if have is None or host is None:
            continue
        if satisfies(have.value, lib_range) and satisfies(host.value, framework_range):
            out.append(
                EnvConflict(
                    kind="unsupported",
                    summary=f"{lib} {have.value} ({where(have, several)}) with {framework} {host.value} "
                    f"({where(host, several)}): {why}",
                    facts=[have, host],
                )
            )
    return out


def _agree(name: str, a: EnvFact, b: EnvFact) -> bool:
    if name == "gpu":
        x, y = _normal(name, a.value), _normal(name, b.value)
        return x.startswith(y) or y.startswith(x)
    return same_version(a.value, b.value)


def _apart(a: EnvFact, b: EnvFact) -> bool:
    """Whether two lines come from two different ranks (from their prefixes or their files' names)
    or from two different hosts (NCCL's `host:pid:tid` prefix names the host, not the rank).

    A line without a rank or a host (the launcher's, an unprefixed print, a file named for no
    rank) may come from any rank: it proves no difference between ranks.
    """
    if a.rank is not None and b.rank is not None:
        return a.rank != b.rank
    return a.host is not None and b.host is not None and a.host != b.host


def _by_host(facts: list[EnvFact]) -> bool:
    """Whether only their hosts tell the facts apart (no two of them name different ranks)."""
    return len({f.rank for f in facts if f.rank is not None}) < 2


def _rank_conflicts(facts: list[EnvFact], several: bool) -> list[EnvConflict]:
    """Different versions or GPU models stated by different ranks (or files) of one job."""
    out = []
    for name in (*VERSIONED, "gpu"):
        mine = [f for f in facts if f.name == name]
        clash: list[EnvFact] = []
        for i, a in enumerate(mine):
            for b in mine[i + 1 :]:
                if _apart(a, b) and not _agree(name, a, b):
                    clash += [f for f in (a, b) if f not in clash]
        if clash:
            shown = "; ".join(f"{f.value} ({where(f, several)})" for f in clash)
            what = "GPU models" if name == "gpu" else f"{name} versions"
            out.append(
                EnvConflict(
                    kind="across_ranks",
                    summary=f"{'nodes' if _by_host(clash) else 'ranks'} of one job report different {what}: {shown}",
                    facts=clash,
                )
            )
    return out


def versions_of(environment: Environment) -> dict[str, EnvFact]:
    """Per package, the first line that states its version (what `applies_to` is checked against)."""
    out: dict[str, EnvFact] = {}
    for f in environment.facts:
        if parse(f.value) is not None:
            out.setdefault(f.name, f)
    return out


def judge_versions(
    sig: Signature, versions: Mapping[str, EnvFact], *, several: bool = False
) -> tuple[float, list[str], list[str]]:
    """What the log's versions mean for a signature: a confidence factor, notes for `why`, texts to show.

    A version outside `applies_to` halves the confidence (the failure cannot happen as the
    signature knows it on that version); a version inside a note's range gets the note.
    """
    factor, notes, texts = 1.0, [], []
    for package, allowed in sig.applies_to.items():
        fact = versions.get(package)
        if fact is None:
            texts.append(
                f"This failure happens with {package} {allowed.range} ({allowed.why}); "
                f"the log does not show the {package} version."
            )
            continue
        inside = satisfies(fact.value, allowed.range)
        if inside is False:
            factor *= 0.5
            notes.append(f"{package} {fact.value} ({where(fact, several)}) is outside {allowed.range}")
            texts.append(
                f"The log shows {package} {fact.value} ({where(fact, several)}), outside {allowed.range} where this "
                f"failure happens ({allowed.why}): look for another cause first."
            )
        elif inside:
            texts.append(
                f"The log shows {package} {fact.value} ({where(fact, several)}), where this happens: {allowed.why}."
            )
    for note in sig.version_notes:
        fact = versions.get(note.package)
        if fact is not None and satisfies(fact.value, note.range):
            advice = fill(note.text, {"version": fact.value})
            texts.append(f"The log shows {note.package} {fact.value} ({where(fact, several)}): {advice}")
    return factor, notes, texts
