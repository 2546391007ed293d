"""Indirect evidence: a generic error under a known operation, a warning that names the cause.

A candidate found only by clues is a lead: `possible`, never `likely`, and it names the lines
that made it (the clue and the frame or operation it was raised in), which are its evidence.
"""

from __future__ import annotations

from app.core.engine.diagnose import diagnose

from .conftest import library, signature

OPTIMIZER_KEYERROR = signature(
    "checkpoint.optimizer_state_mismatch",
    ("param_groups", r"loaded state dict contains a parameter group that doesn't match the size", 0.9),
    fingerprints=[
        {"name": "param_groups", "regex": r"loaded state dict contains a parameter group", "weight": 0.9},
        {
            "name": "keyerror_in_load_state_dict",
            "regex": r"^KeyError: ",
            "weight": 0.45,
            "clue": "type",
            "means": "a KeyError raised inside optimizer.load_state_dict: the saved state lacks an entry the optimizer expects",
            "near": [r'optim[\\/]optimizer\.py", line \d+, in (?:load_state_dict|update_group)'],
            "window": {"before": 12, "after": 0},
        },
    ],
)
ARCH_WARNING = signature(
    "cuda.no_kernel_image",
    ("no_kernel", r"no kernel image is available for execution on the device", 0.95),
    fingerprints=[
        {"name": "no_kernel", "regex": r"no kernel image is available for execution on the device", "weight": 0.95},
        {
            "name": "arch_warning",
            "regex": r"with CUDA capability (?P<arch>sm_\d+) is not compatible with the current PyTorch installation",
            "weight": 0.6,
            "clue": "warning",
            "means": "PyTorch warned that this build has no kernels for the GPU's architecture",
        },
    ],
)
LIB = library(OPTIMIZER_KEYERROR, ARCH_WARNING)

KEYERROR_LOG = b"""Traceback (most recent call last):
  File "train.py", line 88, in <module>
    optimizer.load_state_dict(ckpt["optimizer"])
  File "/usr/lib/python3.10/site-packages/torch/optim/optimizer.py", line 201, in load_state_dict
    state_dict = state_dict.copy()
  File "/usr/lib/python3.10/site-packages/torch/optim/optimizer.py", line 240, in update_group
    new_group['params'] = group['params']
KeyError: 'params'
"""


def test_a_generic_error_inside_a_known_operation_is_offered_as_possible_with_its_lines() -> None:
    d = diagnose(KEYERROR_LOG, LIB)
    (c,) = d.candidates
    assert (c.id, c.band) == ("checkpoint.optimizer_state_mismatch", "possible")
    assert c.confidence < 0.5
    assert "offered from the exception's type and where it was raised (lines 6, 8)" in c.why
    assert [(e.line, e.kind) for e in c.evidence] == [(6, "context"), (8, "fingerprint")]


def test_the_same_error_elsewhere_is_not_a_clue() -> None:
    log = b'  File "app.py", line 3, in main\n    x = cfg["lr"]\nKeyError: \'lr\'\n'
    assert diagnose(log, LIB).candidates == []


def test_a_warning_that_names_the_cause_is_a_lead_and_the_message_makes_it_likely() -> None:
    warning = (
        b"UserWarning: NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current"
        b" PyTorch installation.\n"
    )
    (lead,) = diagnose(warning + b"RuntimeError: CUDA error: unknown error\n", LIB).candidates
    assert (lead.band, lead.facts["arch"]) == ("possible", "sm_120")
    assert "a warning printed before the error (line 1)" in lead.why
    (sure,) = diagnose(
        warning + b"RuntimeError: CUDA error: no kernel image is available for execution on the device\n", LIB
    ).candidates
    assert sure.band == "likely" and "offered from" not in sure.why
