"""Redaction never changes a diagnosis, and no planted secret reaches it."""

from __future__ import annotations

import pytest

from app.core import diagnose
from app.core.knowledge.loading import Library
from app.core.redaction.redactor import NOTHING, all_rules
from tests.test_signatures import BY_ID

SECRETS = [s for r in all_rules() for s in r.positive]
PEM = ["-----BEGIN RSA PRIVATE KEY-----", "MIIEpAIBAAKCAQEAx4TqQzvB8p2mQ5", "-----END RSA PRIVATE KEY-----"]
HEADER = "\n".join([*SECRETS, *PEM]) + "\n"
# Values planted in the logs that must not appear anywhere in a diagnosis.
VALUES = [
    "AKIAZ7Q4R2VXYLM3NP5K",
    "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567",
    "Sup3rS3cret!",
    "hunter22",
    "alice.smith@example.com",
    "MIIEpAIBAAKCAQEAx4TqQzvB8p2mQ5",
    "10.42.0.17",
    "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "xoxb-123456789012",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "dckr_pat_2YotnFZFEjr1zCsicMWpAA9ZxQ",
    "s3cr3tPassw0rd",
    "SECRETpass1",
    "8f14e45fceea167a5a36dedd4bea2543",
    "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",
    "99c25f6172e69f41cecad35ca6af6563",
]
EXAMPLES = [
    (sig_id, i, ex.log) for sig_id, (_, sig) in sorted(BY_ID.items()) for i, ex in enumerate(sig.examples.match)
]


def _top(log: str, library: Library, **kwargs: object) -> str | None:
    """The first candidate a signature found (a lead from similar corpus logs is not the example's doing)."""
    candidates = diagnose(log.encode(), library, **kwargs).candidates  # type: ignore[arg-type]
    return next((c.id for c in candidates if c.basis == "signature"), None)


@pytest.mark.parametrize(("sig_id", "index", "log"), EXAMPLES, ids=[f"{s}-{i}" for s, i, _ in EXAMPLES])
def test_planted_secrets_do_not_change_the_top_candidate(sig_id: str, index: int, log: str, library: Library) -> None:
    plain = _top(log, library, redactor=NOTHING)
    assert _top(log, library) == plain  # the example's own IPs, paths, hosts redacted
    assert _top(HEADER + log, library) == plain  # an environment dump before the failure
    lines = log.split("\n")
    interleaved = "\n".join(f"{line}\n{SECRETS[i % len(SECRETS)]}" for i, line in enumerate(lines))
    # Secrets between every line break what reads consecutive lines; redacting them must not
    # change what the interleaved log is read as.
    diagnosis = diagnose(interleaved.encode(), library)
    top = next((c.id for c in diagnosis.candidates if c.basis == "signature"), None)
    assert top == _top(interleaved, library, redactor=NOTHING)
    dumped = diagnosis.model_dump_json()
    assert not [v for v in VALUES if v in dumped]


def test_the_diagnosis_says_what_was_redacted_by_type(library: Library) -> None:
    log = (
        "export HF_TOKEN=hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567\n"
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
        "GPU 0 has a total capacity of 79.15 GiB of which 1.23 GiB is free. user alice.smith@example.com\n"
    )
    diagnosis = diagnose(log.encode(), library, name="/home/alice/run/train.log")
    assert diagnosis.candidates[0].id == "cuda.oom"
    assert diagnosis.redactions == {"email": 1, "user-path": 1}
    assert diagnosis.input.files == ["/home/[REDACTED:user-path]/run/train.log"]
    assert "alice" not in diagnosis.model_dump_json()
