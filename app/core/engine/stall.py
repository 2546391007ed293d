"""A log with no failure in it that ends in a known start-up phase: the run stalled there.

A log that simply stops cannot be told from one cut short. One that stops on the line a
framework prints as it enters a phase that waits on something outside the process (the other
ranks of a process group, the dataloader's workers, the first step of a distributed session)
and prints nothing after it but warnings says more: that phase never finished. It is offered
as a possible hang only, naming the phase and the line, and only when nothing else was found.

Each phase is the line its framework prints, read from the framework's source (the raise
sites are listed in the hang's signature):

* PyTorch Lightning's `init_dist_connection` (1.0 to 1.5 "initializing ddp: ...", 1.6 and
  later, Fabric included, "Initializing distributed: ...") logs the rank just before
  `torch.distributed.init_process_group`, which waits for every rank of the job;
* coqui-ai Trainer logs " > Using PyTorch DDP" just before its `init_distributed`;
* Lightning's model summary ends with its totals ("Total params", "Total estimated model params
  size (MB)", the mode counts of later 2.x releases) just before the sanity check and the first
  training batch; its dataloader warnings come as the first loader starts;
* Composer's `Trainer._spin_dataloaders` logs "Spinning the dataloaders" and then draws a
  batch from each dataloader;
* TensorFlow 1.x's `SessionManager` logs "Done running local_init_op." as its session is ready,
  just before the first step of a (distributed) `MonitoredTrainingSession` runs;
* Ultralytics' dataset scan ends with its "Scanning ... 100%" bar and "New cache created" line,
  before the dataloader workers start;
* Keras' `ProgbarLogger` prints "Epoch 1/N" before the first batch of the first epoch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from app.core.engine.advice import Setting
from app.core.engine.candidate import one_line_candidate
from app.core.engine.ending import quiet, tail
from app.core.engine.file_scan import FileScan
from app.core.knowledge.loading import Library
from app.core.models import Candidate, Line

HANG = "proc.hang_no_error"
CONFIDENCE = 0.3  # a stall is a reading of where a log ends, never more than possible
AFTER = 3  # warning lines a log may print after the phase's line and still stop in it


@dataclass(frozen=True, slots=True)
class Phase:
    """A start-up phase: the line that enters it and what it waits for."""

    name: str
    regex: str
    waits: str


PHASES = (
    Phase(
        "lightning_ddp_init",
        r"^(?:initializing ddp|Initializing distributed): GLOBAL_RANK: \d+, MEMBER: \d+/\d+\s*$",
        "PyTorch Lightning's process-group start (init_process_group waits for every rank of the job)",
    ),
    Phase(
        "coqui_ddp_init",
        r"^\s?> Using PyTorch DDP\s*$",
        "the coqui Trainer's process-group start (init_distributed waits for every rank of the job)",
    ),
    Phase(
        "lightning_summary_end",
        r"^[\d.,]+\s?[KMBT]?\s+(?:Total params|Total estimated model params size \(MB\)"
        r"|Modules in (?:train|eval) mode)\s*$",
        "the end of PyTorch Lightning's model summary (the sanity check and the first batch come next)",
    ),
    Phase(
        "composer_spin_dataloaders",
        r"\bcomposer\.trainer\.trainer: Spinning the dataloaders\s*$",
        "Composer spinning its dataloaders (each one's first batch is drawn)",
    ),
    Phase(
        "tf_local_init_done",
        r"(?:^INFO:tensorflow:|\bsession_manager\.py:\d+\] )Done running local_init_op\.\s*$",
        "TensorFlow's session start (the first step of the session runs next)",
    ),
    Phase(
        "ultralytics_dataset_scanned",
        r"^(?:train|val|test): (?:New cache created: \S|Scanning \S.{0,400}? \d+ images, \d+ backgrounds, "
        r"\d+ corrupt: 100%)",
        "Ultralytics' dataset scan (the label cache is written and the dataloader workers start next)",
    ),
    Phase(
        "keras_first_epoch",
        r"^\s*Epoch 1/\d{1,6}\s*$",
        "Keras starting the first epoch (its first batch never reported)",
    ),
)
_WARNING = r"(?i)warn(?:ing)?s?\b|Warning\b"


@cache
def _compiled(source: str) -> re.Pattern[str]:
    return re.compile(source)


def _phase(line: Line) -> Phase | None:
    text = line.text[line.content_start :]
    return next((p for p in PHASES if _compiled(p.regex).search(text)), None)


def _stalled(lines: Sequence[Line]) -> tuple[Line, Phase] | None:
    """The last phase line of a file's tail, when all that follows it is warnings (and their source lines)."""
    # A short file's head and tail overlap: its scan keeps such a line twice.
    lines = list({line.no: line for line in lines if line.text.strip()}.values())
    for i in range(len(lines) - 1, max(len(lines) - 2 - AFTER, -1), -1):
        if (phase := _phase(lines[i])) is not None:
            return lines[i], phase
        text = lines[i].text[lines[i].content_start :]
        warned = _compiled(_WARNING).search(text) or (
            i > 0 and text[:1].isspace() and _compiled(_WARNING).search(lines[i - 1].text)
        )
        if not warned or not quiet(text):
            return None
    return None


def stalled_start(scans: Sequence[FileScan], library: Library, setting: Setting | None = None) -> Candidate | None:
    """The possible hang of a log that ends in a known start-up phase, with nothing but warnings after it."""
    sig = library.signatures.get(HANG)
    if sig is None:
        return None
    for scan in scans:
        if (found := _stalled(tail(scan))) is None:
            continue
        line, phase = found
        text = line.text
        m = _compiled(phase.regex).search(text, line.content_start)
        return one_line_candidate(
            sig,
            line,
            (m.start(), m.end()) if m else (line.content_start, len(text)),
            confidence=CONFIDENCE,
            why=f"the log stops in {phase.waits}: its last line enters that phase and nothing but warnings follows "
            f"(no error, no progress) - the run stalled there, or the log was cut",
            pattern=f"stalled_{phase.name}",
            kind="fingerprint",
            setting=setting,
            file=scan.name,
        )
    return None
