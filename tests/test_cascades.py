"""Multi-rank logs built from the signatures' own examples: the root failure first, echoes after.

For every signature that can start a failure, its first real example is written as
rank 3's output, then the other ranks time out in NCCL collectives, the launcher
sends SIGTERM and prints its ChildFailedError summary naming rank 3. The
initiating failure must be the signature the log was built from. The echoes carry
no timestamps (older torch wording), so the examples' own clocks cannot reorder them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import regex

from app.core import diagnose, load_library
from app.core.knowledge.loading import Library, load_signatures

SIGNATURES = Path(__file__).resolve().parents[1] / "signatures"
LOADED = {sig.id: sig for _, sig in load_signatures(SIGNATURES)[0]}
BENIGN = sorted(i for i, s in LOADED.items() if s.role == "benign")

ECHOES = """\
[rank0]:[E ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=48213, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600089 milliseconds before timing out.
[rank1]:[E ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=48213, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600089 milliseconds before timing out.
[rank2]:[E ProcessGroupNCCL.cpp:607] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=48213, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600089 milliseconds before timing out.
WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 4000 closing signal SIGTERM
WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 4001 closing signal SIGTERM
Traceback (most recent call last):
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-06-14_11:21:00
  host      : node000
  rank      : 3 (local_rank: 3)
  exitcode  : 1 (pid: 4003)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""

# A signature that declares the echoes exclude it (a hang without an error is no longer one once
# the watchdog has raised) cannot initiate beneath them: the echo is then the failure.
EXCLUDED_BY_ECHOES = sorted(
    i for i, s in LOADED.items() if any(regex.search(ex.regex, ECHOES, regex.M) for ex in s.excludes)
)
ROOTS = sorted(i for i, s in LOADED.items() if s.role not in ("collateral", "benign") and i not in EXCLUDED_BY_ECHOES)


@pytest.fixture(scope="module")
def library() -> Library:
    return load_library(SIGNATURES)


def cascade(sig_id: str) -> str:
    sig = LOADED[sig_id]
    example = sig.examples.match[0].log
    emitted = sig.source == "emitted" or any(p.source == "emitted" for p in sig.fingerprints)
    # A kernel or scheduler line is not written by a rank; a rank's own output is.
    lines = example.splitlines() if emitted else [f"[rank3]: {line}" for line in example.splitlines()]
    return "{'loss': 1.234, 'learning_rate': 5e-05, 'epoch': 0.42}\n" + "\n".join(lines) + "\n" + ECHOES


@pytest.mark.parametrize("sig_id", ROOTS)
def test_the_root_failure_initiates_and_the_echoes_are_collateral(sig_id: str, library: Library) -> None:
    d = diagnose(cascade(sig_id).encode(), library)
    assert d.initiating is not None and d.initiating.id == sig_id, [(c.id, c.role, c.line) for c in d.candidates]
    echoes = {c.id: c.role for c in d.candidates if c.id in ("dist.child_failed", "dist.sigterm_collateral")}
    assert set(echoes.values()) <= {"collateral"}


@pytest.mark.parametrize("sig_id", EXCLUDED_BY_ECHOES)
def test_a_signature_the_echoes_exclude_gives_way_to_them(sig_id: str, library: Library) -> None:
    d = diagnose(cascade(sig_id).encode(), library)
    assert sig_id not in {c.id for c in d.candidates}
    assert d.initiating is not None and d.initiating.id == "nccl.watchdog_timeout"


def test_the_cascade_without_a_root_names_the_timeout(library: Library) -> None:
    d = diagnose(ECHOES.encode(), library)
    assert d.initiating is not None and d.initiating.id == "nccl.watchdog_timeout"


@pytest.mark.parametrize("sig_id", BENIGN)
def test_a_harmless_line_is_explained_and_never_a_candidate(sig_id: str, library: Library) -> None:
    """A known-harmless line inside a run that goes on: shown as harmless, not as the failure."""
    progress = "".join(
        f"{{'loss': {2.0 - i / 100:.3f}, 'learning_rate': 5e-05, 'epoch': {i / 10:.1f}}}\n" for i in range(12)
    )
    d = diagnose((progress + LOADED[sig_id].examples.match[0].log + progress).encode(), library)
    assert sig_id not in {c.id for c in d.candidates}
    assert sig_id in {h.id for h in d.harmless}
