"""A log that ends in a known start-up phase, with nothing but warnings after it, is a possible hang there."""

from __future__ import annotations

import pytest

from app.core.engine.diagnose import diagnose
from app.core.engine.stall import PHASES
from app.core.knowledge.loading import Library

START = b"GPU available: True (cuda), used: True\nLOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0,1]\n"


@pytest.mark.parametrize(
    ("last", "phase"),
    [
        (b"initializing ddp: GLOBAL_RANK: 0, MEMBER: 1/2", "lightning_ddp_init"),
        (b"Initializing distributed: GLOBAL_RANK: 3, MEMBER: 4/8", "lightning_ddp_init"),
        (b" > Using PyTorch DDP", "coqui_ddp_init"),
        (b"27.9 K    Total params", "lightning_summary_end"),
        (b"1,000.404 Total estimated model params size (MB)", "lightning_summary_end"),
        (
            b"2024-08-20 15:00:38,102: rank0[113865][MainThread]: DEBUG: composer.trainer.trainer: Spinning the dataloaders",
            "composer_spin_dataloaders",
        ),
        (b"INFO:tensorflow:Done running local_init_op.", "tf_local_init_done"),
        (b"val: New cache created: /data/labels/val.cache", "ultralytics_dataset_scanned"),
        (
            b"train: Scanning /data/labels/train... 590503 images, 79 backgrounds, 0 corrupt: 100% 590503/590503 677.1it/s",
            "ultralytics_dataset_scanned",
        ),
        (b"Epoch 1/15", "keras_first_epoch"),
    ],
)
def test_a_log_that_ends_entering_a_start_up_phase_is_a_possible_hang(
    library: Library, last: bytes, phase: str
) -> None:
    d = diagnose(START + last + b"\n", library, name="train.log")
    assert [(c.id, c.band, c.role) for c in d.candidates] == [("proc.hang_no_error", "possible", "initiating")]
    (e,) = d.candidates[0].evidence
    assert (e.line, e.pattern, e.kind) == (3, f"stalled_{phase}", "fingerprint")
    assert e.span[1] > e.span[0] and e.text[e.span[0] : e.span[1]] in last.decode()
    assert "the log stops in" in d.candidates[0].why


def test_warnings_after_the_phase_line_do_not_end_it(library: Library) -> None:
    log = START + (
        b"0.125     Total estimated model params size (MB)\n"
        b"/opt/venv/lib/python3.10/site-packages/pytorch_lightning/trainer/connectors/data_connector.py:224: "
        b"PossibleUserWarning: The dataloader, train_dataloader, does not have many workers which may be a bottleneck.\n"
        b"  rank_zero_warn(\n"
    )
    d = diagnose(log, library, name="train.log")
    assert [(c.id, c.line) for c in d.candidates] == [("proc.hang_no_error", 3)]


@pytest.mark.parametrize(
    "after",
    [
        b"Epoch 0:  12%|#2        | 12/100 [00:03<00:22,  3.91it/s, loss=0.693]",  # progress: it went on
        b"step 1 loss 2.31 lr 1e-4",
        b"Training completed. Do not forget to share your model on huggingface.co/models =)",
        b"building the optimizer",  # a line of its own: the phase ended
        b"UserWarning: could not open the tensorboard directory",  # a warning that reports a failure
    ],
)
def test_anything_but_a_quiet_warning_after_the_phase_line_is_no_stall(library: Library, after: bytes) -> None:
    d = diagnose(START + b"Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2\n" + after + b"\n", library)
    assert all(c.id != "proc.hang_no_error" for c in d.candidates)


def test_a_later_epoch_header_is_progress_not_start_up(library: Library) -> None:
    d = diagnose(START + b"Epoch 4/15\n", library, name="train.log")
    assert not d.candidates and d.ending is not None and d.ending.state == "stopped"


def test_the_ending_is_still_read_under_a_stall(library: Library) -> None:
    d = diagnose(START + b"Epoch 1/15\n", library, name="train.log")
    assert [c.id for c in d.candidates] == ["proc.hang_no_error"]
    assert d.ending is not None and (d.ending.state, d.ending.step) == ("stopped", 1)


def test_a_failure_found_elsewhere_is_never_joined_by_a_stall(library: Library) -> None:
    log = b"RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\nInitializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2\n"
    d = diagnose(log, library, name="train.log")
    assert d.candidates and all(c.id != "proc.hang_no_error" for c in d.candidates)


def test_a_phase_line_far_from_the_end_says_nothing(library: Library) -> None:
    log = START + b"Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2\n" + b"warning: slow disk\n" * 5
    assert not diagnose(log, library, name="train.log").candidates


def test_every_phase_is_listed_once() -> None:
    names = [p.name for p in PHASES]
    assert len(names) == len(set(names))
