"""Small inline libraries for core tests: the tests need no files beyond the YAML they write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.core.knowledge.loading import Library, build_library, load_library
from app.core.knowledge.schema import Signature

REPO = Path(__file__).resolve().parents[2]
SIGNATURES = REPO / "signatures"


def signature(id: str, *fingerprints: tuple[str, str, float], **fields: Any) -> Signature:
    """A valid signature with boilerplate knowledge; fingerprints are (name, regex, weight)."""
    data: dict[str, Any] = {
        "id": id,
        "title": id.replace(".", " ").title(),
        "layer": id.split(".")[0],
        "summary": f"{id} happened.",
        "fingerprints": [{"name": n, "regex": r, "weight": w} for n, r, w in fingerprints],
        "mechanism": "How it happens.",
        "root_causes": [{"cause": "A cause.", "tell": "How to tell."}],
        "confirm": ["Look."],
        "fix": ["Fix it."],
        "verify": "Check it.",
        "resume": "Safe.",
        "prevention": ["Prevent it."],
        "references": [{"title": "Docs", "url": "https://example.org/docs"}],
        "examples": {"match": [{"log": "x", "source": "test"}], "no_match": [{"log": "y", "source": "test"}]},
    }
    data.update(fields)
    return Signature.model_validate(data)


def library(*signatures: Signature) -> Library:
    return build_library(signatures)


@pytest.fixture(scope="session")
def shipped_library() -> Library:
    """The library in signatures/, as the CLI and the service load it."""
    return load_library(SIGNATURES)


@pytest.fixture(scope="session")
def cascade_library() -> Library:
    """OOM, watchdog timeout, launcher summary and SIGTERM: the classic multi-rank cascade."""
    return library(
        signature(
            "cuda.oom",
            ("oom", r"CUDA out of memory\. Tried to allocate (?P<requested>[\d.]+ [KMGT]i?B)", 0.95),
        ),
        signature(
            "nccl.watchdog_timeout",
            (
                "watchdog",
                r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)",
                0.9,
            ),
            role="either",
            consequence_of=["cuda.oom", "host.oom_killed"],
        ),
        signature(
            "dist.child_failed",
            ("child_failed", r"torch\.distributed\.elastic\.multiprocessing\.errors\.ChildFailedError", 0.8),
            symptoms=[
                {
                    "name": "root_rank",
                    "regex": r"^\s*rank\s*: (?P<root_rank>\d+) \(local_rank",
                    "weight": 0.1,
                    "near": [r"Root Cause \(first observed failure\)"],
                    "window": {"before": 8, "after": 0},
                },
                {"name": "exitcode", "regex": r"^\s*exitcode\s*: (?P<exitcode>-?\d+)", "weight": 0.1},
            ],
            role="collateral",
        ),
        signature(
            "dist.sigterm_collateral",
            ("sigterm", r"Sending process \d+ closing signal SIGTERM", 0.7),
            role="collateral",
        ),
        signature(
            "host.oom_killed",
            ("bare_killed", r"^Killed$", 0.3),
            ("kernel", r"Out of memory: Killed process (?P<pid>\d+)", 0.95),
        ),
        signature(
            "data.decode",
            ("decode", r"UnicodeDecodeError: 'utf-8' codec can't decode", 0.8),
        ),
    )
