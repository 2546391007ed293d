"""A lead for a log whose first failure no signature recognises: what logs like it were.

Offered only when nothing else was found and the log shows an error line that could have
started the run (an unrecognised start; a finished run has none), as a possible candidate: the
failure the nearest labelled public-thread logs of the corpus were diagnosed with, naming those
threads, with the line whose words weigh most in those logs as its evidence. Never likely: it is
a resemblance, not a match. A log with no error line at all gets none: most such logs are runs
cut short or still going, and a resemblance to failed runs would be a false alarm.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from app.core.engine.advice import Setting
from app.core.engine.candidate import one_line_candidate
from app.core.engine.file_scan import FileScan
from app.core.engine.job import picked_lines
from app.core.knowledge.loading import Library
from app.core.models import Candidate

CONFIDENCE = 0.2  # a resemblance to other logs: below anything a fingerprint found


def neighbour_lead(
    scans: Sequence[FileScan],
    library: Library,
    setting: Setting | None = None,
    *,
    unlike: Collection[str] = (),
) -> Candidate | None:
    """The failure the labelled logs nearest to this one name, as a possible candidate (None: none near).

    `unlike`: sources whose logs are not offered (a corpus case is not its own neighbour).
    """
    index = library.neighbours.get()
    if index is None:
        return None
    if unlike:
        index = index.without(unlike)
    lines = sorted({(line.file or "", line.no): line for scan in scans for line in picked_lines(scan)}.items())
    text = "\n".join(line.text for _, line in lines)
    allowed = {sid: s for sid, s in library.signatures.items() if s.role != "benign"}
    vote = index.vote(text, allowed)
    if vote is None:
        return None
    sig = library.signatures[vote.expected]
    threads = [n.source for n in vote.neighbours]
    # The line that weighs most in the logs that voted (the first of equals): what made the lead.
    weight = index.weigher(vote)
    line = max((line for _, line in lines), key=lambda ln: (weight(ln.text), -ln.no))
    return one_line_candidate(
        sig,
        line,
        (line.content_start, len(line.text)),
        confidence=CONFIDENCE,
        why=f"no signature recognises this log; of the labelled public-thread logs, the "
        f"{_count(len(threads))} most like it (words of its error lines and its ends) were diagnosed as this: "
        f"{', '.join(threads)}. A resemblance, not a match: compare the threads with the marked line",
        pattern="neighbours",
        kind="context",
        setting=setting,
        basis="neighbours",
    )


def _count(n: int) -> str:
    return "log" if n == 1 else f"{n} logs"
