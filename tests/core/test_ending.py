"""How a log with no failure ends: a finished run reads healthy, one that stops mid-run says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.engine.diagnose import diagnose, diagnose_many
from app.core.knowledge.loading import Library
from app.core.models import Diagnosis
from app.core.rendering.text import render_markdown, render_text
from app.core.rendering.verdict import quiet_heading, verdict
from app.evaluation.corpus import load_case

CASES = Path(__file__).resolve().parents[1] / "corpus" / "cases"
PROGRESS = b"".join(b"step %d loss 2.%02d lr 1e-4\n" % (i, 50 - i) for i in range(1, 11))


def _case(case_id: str, library: Library) -> Diagnosis:
    case = load_case(CASES / case_id)
    return diagnose_many([(p.name, p) for p in case.logs], library, threads=1)


@pytest.mark.parametrize(
    "last",
    [
        b"Training completed. Do not forget to share your model on huggingface.co/models =)",
        b"{'train_runtime': 3601.2, 'train_samples_per_second': 12.4, 'train_loss': 1.93, 'epoch': 3.0}",
        b"`Trainer.fit` stopped: `max_epochs=3` reached.",
        b"[I1204 10:11:12.000 torch/distributed/elastic/agent/server/api.py:889] [default] worker group successfully"
        b" finished. Local worker group finished (WorkerState.SUCCEEDED). Waiting 300 seconds for other agents",
        b"Process finished with exit code 0",
        b"Finished training after 30 epochs",
    ],
)
def test_a_finishing_line_at_the_end_reads_healthy(library: Library, last: bytes) -> None:
    d = diagnose(PROGRESS + last + b"\n", library, name="train.log")
    assert not d.candidates and d.ending is not None
    assert (d.ending.state, d.ending.line) == ("completed", 11)
    assert quiet_heading(d) == "Looks healthy"
    assert verdict(d) == "Verdict: looks healthy: the run finished normally (line 11) and no failure was found."


@pytest.mark.parametrize(
    ("last", "step"),
    [
        (b"step 11 loss 2.31 lr 1e-4", 11),
        (
            b" 45%|\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88     | 450/1000 [01:23<01:40,  5.41it/s, loss=0.31]",
            450,
        ),
        (b"Epoch 4/15", 4),
        (b" 320/1875 [===>..........................] - ETA: 1:23 - loss: 2.3012 - accuracy: 0.1109", 320),
        (b"{'loss': 0.7123, 'learning_rate': 4.9e-05, 'epoch': 0.42}", None),
    ],
)
def test_a_log_that_ends_on_progress_says_it_stops_there(library: Library, last: bytes, step: int | None) -> None:
    d = diagnose(PROGRESS + last + b"\n", library, name="train.log")
    assert not d.candidates and d.ending is not None
    assert (d.ending.state, d.ending.line, d.ending.step) == ("stopped", 11, step)
    at = f"at step {step}" if step is not None else "on training progress"
    assert verdict(d).startswith(f"Verdict: no error found: the log stops {at} (line 11) without an error")
    assert render_text(d).startswith("No error: the log stops mid-run (11 lines")


def test_nothing_is_said_of_an_end_that_shows_neither(library: Library) -> None:
    d = diagnose(PROGRESS + b"loading the validation set\nsomething went wrong, giving up\n", library, name="x.log")
    assert d.ending is None
    d = diagnose(b"Training completed.\n" + PROGRESS + b"ERROR: the run is broken\n", library, name="y.log")
    # An error line nothing recognises: no ending is read, whether or not a lead is offered for it.
    assert d.ending is None and verdict(d).startswith("Verdict: no known failure found")


def test_a_failure_is_never_called_healthy(library: Library) -> None:
    oom = b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    d = diagnose(PROGRESS + oom + b"Training completed.\n", library, name="z.log")
    assert d.candidates and d.ending is None


def test_a_healthy_corpus_run_lists_its_harmless_lines(library: Library) -> None:
    d = _case("gen-dist-healthy-find-unused-warning", library)
    assert d.ending is not None and d.ending.state == "completed" and d.harmless
    text = render_text(d)
    assert text.startswith("Looks healthy (28 lines") and "HARMLESS" in text
    assert render_markdown(d).startswith("## Tracelore diagnosis\n\n**Looks healthy** (28 lines)\n")


def test_a_hang_that_just_stops_says_where(library: Library) -> None:
    # Keras prints "Epoch 1/15" and nothing after it: the thread's run hung at its first epoch.
    d = _case("gh-keras-team-keras-8595", library)
    assert d.ending is not None and (d.ending.state, d.ending.step) == ("stopped", 1)
