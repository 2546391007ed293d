"""Pad a signature library to N patterns with realistic, non-matching message families.

The padding signatures look like real ones (an exception class, a subsystem, a
captured value) so the engine's automaton grows as it would with real knowledge.
They are valid signature files; their examples are not meant to pass the lint.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import yaml

SUBSYSTEMS = "Allocator Scheduler Tokenizer Collective Shard Checkpoint Kernel Stream Graph Planner Loader Bucket Reducer Fabric Mesh".split()
VERBS = "allocate reduce gather scatter resolve flush compact verify register broadcast serialize rebalance".split()
NOUNS = "segment bucket shard tensor descriptor handle region partition replica manifest channel barrier".split()
TEMPLATES = (
    "{Sub}Error: failed to {verb} {noun} (?P<{cap}>[0-9]{{1,9}}) after [0-9]{{1,6}} retries",
    "{sub}_{noun}_{verb}: unexpected state (?P<{cap}>[A-Z_]{{3,30}}) in {Sub}",
    "RuntimeError: \\[{Sub}\\] cannot {verb} {noun} of size (?P<{cap}>[0-9.]+ [KMG]i?B)",
    "E[0-9]{{4}} .{{0,40}}{Sub}{Noun}\\.cpp:[0-9]{{1,5}}\\] {noun} {verb} timed out",
    "(?i){sub} {noun} {verb} aborted: code=(?P<{cap}>-?[0-9]{{1,5}})",
)


def synthetic_pattern(rng: random.Random, i: int) -> str:
    sub, verb, noun = rng.choice(SUBSYSTEMS), rng.choice(VERBS), rng.choice(NOUNS)
    return rng.choice(TEMPLATES).format(
        Sub=f"{sub}{i}", sub=f"{sub.lower()}{i}", verb=verb, noun=noun, Noun=noun.title(), cap=f"v{i}"
    )


def pad_library(source: Path, out: Path, total: int, *, seed: int = 11, per_file: int = 5) -> int:
    """Copy the library at source to out and add padding signatures until `total` patterns; return the count."""
    from app.core.knowledge.loading import load_library

    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(source, out)
    have = len(load_library(out).regexes)
    rng = random.Random(seed)
    i = 0
    (out / "padding").mkdir(exist_ok=True)
    while have < total:
        n = min(per_file, total - have)
        sig_id = f"padding.p{i:04d}"
        doc = {
            "id": sig_id,
            "title": f"Padding {i}",
            "layer": "padding",
            "summary": "Benchmark padding.",
            "fingerprints": [
                {"name": f"f{k}", "regex": synthetic_pattern(rng, i * 10 + k), "weight": 0.9} for k in range(n)
            ],
            "mechanism": "None.",
            "root_causes": [{"cause": "None.", "tell": "None."}],
            "confirm": ["None."],
            "fix": ["None."],
            "verify": "None.",
            "resume": "None.",
            "prevention": ["None."],
            "references": [{"title": "None", "url": "https://example.org/"}],
            "examples": {"match": [{"log": "x", "source": "bench"}], "no_match": [{"log": "y", "source": "bench"}]},
        }
        (out / "padding" / f"{sig_id}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        have += n
        i += 1
    return have


def small_library(source: Path, out: Path, patterns: int = 10) -> int:
    """A library of the first few real fingerprints only (the low end of the scaling curve)."""
    from app.core.knowledge.loading import load_signatures

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    shutil.copy(source / "taxonomy.yaml", out / "taxonomy.yaml")
    loaded, _ = load_signatures(source)
    count = 0
    for path, sig in loaded:
        if count >= patterns:
            break
        keep = sig.fingerprints[: patterns - count]
        data = sig.model_dump(mode="json", exclude_defaults=True)
        data["fingerprints"] = [p.model_dump(mode="json", exclude_defaults=True) for p in keep]
        data.pop("symptoms", None)
        data.pop("excludes", None)
        for p in data["fingerprints"]:
            p.pop("near", None)
        (out / path.parent.name).mkdir(exist_ok=True)
        (out / path.parent.name / path.name).write_text(yaml.safe_dump(data, sort_keys=False))
        count += len(keep)
    return count
