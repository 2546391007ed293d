"""How a log with no failure in it ends: the run finished, or the log just stops mid-run.

"No known failure found" is the wrong page for a run that ended well, and a weak one for a
log that ends on a training step: that log says something too (the process was killed from
outside, is still running or hung, or the log was cut), and a person should hear it. Both are
read from the last lines of each file only; a finishing line anywhere else (an earlier run's
"Training completed" above a second attempt) says nothing about how this log ends.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import Literal

from app.core.engine.file_scan import FileScan
from app.core.engine.scanner import HEAD_TAIL_LINES
from app.core.models import Candidate, Line, RunEnding

# Lines that frameworks and launchers print when a run ends normally, from their sources:
# HF Trainer's closing log ("Training completed. Do not forget to share your model", the
# train_runtime metrics dict), Lightning's `Trainer.fit` stopped: `max_epochs=N` reached,
# torchelastic's agent ("Local worker group finished (WorkerState.SUCCEEDED)", "Done waiting
# for other agents"), IDEs' and shells' "Process finished with exit code 0", and the plain
# "training finished/complete/done" lines of training scripts.
_COMPLETED = (
    r"(?i)\b(?:training|fine-?tuning|train)\b[^\n]{0,40}?\b(?:is |has )?(?:completed?|finished|done|complete|over)\b"
    r"(?![^\n]{0,20}\b(?:with errors?|unsuccessful|failed)\b)"
    r"|\b(?:finished|completed?) (?:the )?(?:training|fine-?tuning)\b"
    r"|['\"]train_runtime['\"]: ?\d"
    r"|`Trainer\.fit` stopped: `max_(?:epochs|steps)=\d+` reached"
    r"|WorkerState\.SUCCEEDED|\bDone waiting for other agents\b"
    r"|\b(?:Process finished|exited) with (?:exit )?code 0\b"
    r"|^\s*(?:all )?done[.!]*\s*$"
)
# The step a progress line reports: "step 120", "iter: 3400", "Epoch 3/10", "12/500 [".
_STEP = (
    r"(?i)\b(?:global[_ ]step|step|iteration|iter|it|epoch)\b\s*[:=#\[]?\s*(?P<n>\d{1,9})\b(?!\.\d)"
    r"|(?P<bar>\d{1,9})/\d{1,9} ?\["
)
# Training progress as trainers print it: tqdm bars, Keras bars and epoch headers, step lines
# with a metric, the HF Trainer's metrics dict (the library's own progress patterns, widened).
_PROGRESS = (
    r"\d%\|[^\n]{0,200}\| *\d{1,12}/\d{1,12} \["
    r"|(?i:\b(?:global[_ ]step|step|iteration|iter|epoch)\b[ :=#\[]{1,8}\d{1,9}\b"
    r"[^\n]{0,200}\b(?:loss|lr|acc\w*|ppl)\b)"
    r"|\{['\"](?:loss|train_loss|eval_loss)['\"]: "
    r"|^\s*\d{1,9}/\d{1,9} \[[=>.]{3,}\]"
    r"|^\s*Epoch \d{1,6}/\d{1,6}\s*$"
)
_FAILED = (
    r"(?i)\b(?:error|exception|traceback|fatal|fail(?:ed|ure)?|killed|abort|cannot|can't|could not|unable|refused"
    r"|denied|wrong|giving up)"
)


@cache
def _compiled(source: str) -> re.Pattern[str]:
    """A pattern of this module, compiled when first used: a log that ended in a failure needs none."""
    return re.compile(source)


AFTER_PROGRESS = 3  # lines a log may print after its last progress line and still "stop on progress"


def tail(scan: FileScan) -> list[Line]:
    """The last lines of a file, as its scan kept them, in order."""
    start = max(scan.lines - HEAD_TAIL_LINES, 0)
    return sorted((line for line in scan.edge_lines if line.no > start), key=lambda line: line.no)


def _ending(line: Line, state: Literal["completed", "stopped"]) -> RunEnding:
    step = None
    if state == "stopped" and (m := _compiled(_STEP).search(line.text)) is not None:
        step = int(m.group("n") or m.group("bar"))
    return RunEnding(state=state, line=line.no, file=line.file, rank=line.rank, text=line.text, step=step)


def quiet(text: str) -> bool:
    """Whether a line says nothing of how a run went: no progress, no failure, no finish."""
    return not any(_compiled(p).search(text) for p in (_PROGRESS, _FAILED, _COMPLETED))


def _completed(tail: Sequence[Line]) -> Line | None:
    """The last finishing line of a tail, if nothing after it looks like a failure."""
    for i in range(len(tail) - 1, -1, -1):
        text = tail[i].text[tail[i].content_start :]
        if _compiled(_COMPLETED).search(text) and not _compiled(_FAILED).search(text):
            if any(_compiled(_FAILED).search(later.text) for later in tail[i + 1 :]):
                return None
            return tail[i]
    return None


def run_ending(candidates: Sequence[Candidate], scans: Sequence[FileScan]) -> RunEnding | None:
    """How the job's logs end, when no failure ended it (None: a failure did, or the end says nothing).

    Completed when a file's last lines say the run finished; stopped when a file ends on a
    progress line (a training step, a progress bar) with nothing after it that finishes the run.
    """
    if any(c.episode == "terminal" for c in candidates):
        return None
    stopped: RunEnding | None = None
    for scan in scans:
        last = tail(scan)
        if not last:
            continue
        if (done := _completed(last)) is not None:
            return _ending(done, "completed")
        for i in range(len(last) - 1, max(len(last) - 2 - AFTER_PROGRESS, -1), -1):
            if _compiled(_PROGRESS).search(last[i].text[last[i].content_start :]):
                if not any(_compiled(_FAILED).search(later.text) for later in last[i + 1 :]):
                    stopped = stopped or _ending(last[i], "stopped")
                break
    return stopped
