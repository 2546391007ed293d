"""What is kept of a diagnosed log: the diagnosis, the lines around its evidence, and (by choice) the log.

`keep()` is the whole walk of an accepted log once it is in the core: checked for text,
hashed, diagnosed, its context windows cut and redacted, the whole log redacted and
compressed when it is to be kept, and the redactions counted over everything kept.
Nothing leaves it unredacted.
"""

from __future__ import annotations

import hashlib
import time
import zlib
from collections.abc import Sequence
from typing import BinaryIO

from app.core.engine.diagnose import diagnose, diagnose_many, shown_redactions
from app.core.engine.reader import decode, iter_chunks, strip_ansi
from app.core.engine.sniff import SNIFF, check_text
from app.core.knowledge.loading import Library
from app.core.models import Diagnosis, Window, WindowLine
from app.core.redaction.redactor import DEFAULT, Budget, Redactor
from app.core.selection.excerpt import Excerpt, diagnose_excerpt, excerpt_windows
from app.core.stored import StoredDiagnosis
from app.errors import OverBudget

MAX_WINDOW_LINES = 2000  # context lines kept per diagnosis, whatever the evidence
# Work the redaction of a whole log to be kept may take (app.core.redaction.redactor.Budget: a unit is
# a line the gate flags, a line through the rules or a match looked at, a microsecond or two each):
# enough for any log people keep (a generated 10 MB training log needs none, a corpus log a few per
# KiB), while a log made of secret-like tokens, which took 100x the CPU of an ordinary one (issue
# #38), stops there and is not kept whole: its diagnosis and windows are kept as always.
REDACTION_FLOOR = 1 << 16
REDACTION_PER_MIB = 1 << 14

Logs = Sequence[tuple[str | None, BinaryIO]]


def _hash(files: Sequence[BinaryIO]) -> tuple[int, str]:
    """Size and SHA-256 of the logs, one after the other (of the one log, when there is one)."""
    digest = hashlib.sha256()
    size = 0
    for file in files:
        while block := file.read(1 << 20):
            digest.update(block)
            size += len(block)
        file.seek(0)
    return size, digest.hexdigest()


def compress_redacted(logs: Logs, redactor: Redactor) -> tuple[bytes | None, dict[str, int]]:
    """The whole log as kept: decoded, ANSI stripped, secrets redacted line by line, gzip-compressed.

    Several logs are kept one after the other (by name), each under a `==> name <==` line (as `tail` prints them).
    None when redacting it would take more than its budget (REDACTION_FLOOR and REDACTION_PER_MIB).
    """
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)
    budget = Budget(REDACTION_FLOOR)
    stream = redactor.stream(budget)
    parts = []
    try:
        for name, file in logs:
            if len(logs) > 1:
                parts.append(packer.compress(f"==> {name} <==\n".encode()))
            for chunk in iter_chunks(file):
                budget.grant(len(chunk.data) * REDACTION_PER_MIB >> 20)
                # The whole chunk at once: one scan finds the few lines a rule could touch.
                text = chunk.data.decode("utf-8", errors="replace").replace("\x00", "").replace("\x1b", "")
                parts.append(packer.compress(redactor.text(text, stream).text.encode("utf-8")))
            file.seek(0)
    except OverBudget:
        for _, file in logs:
            file.seek(0)
        return None, {}
    parts.append(packer.flush())
    return b"".join(parts), dict(sorted(stream.counts.items()))


def wanted_spans(
    diagnosis: Diagnosis, context: int, name: str | None = None, *, every: bool = True
) -> list[tuple[int, int]]:
    """Spans of lines around the evidence and unexplained lines (of file `name` unless `every`)."""
    lines = {e.line for c in diagnosis.candidates for e in c.evidence if every or e.file == name}
    lines |= {u.line for u in diagnosis.unexplained if every or u.file == name}
    spans: list[tuple[int, int]] = []
    for no in sorted(lines):
        start, end = max(1, no - context), no + context
        if spans and start <= spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    return spans


Cut = tuple[str | None, list[tuple[int, str]]]  # a window before redaction: its file, its (line number, text)


def evidence_windows(
    file: BinaryIO, diagnosis: Diagnosis, *, context: int, name: str | None, every: bool = True
) -> list[Cut]:
    """The log lines around every evidence and unexplained line, not yet redacted.

    With `every` false, only the lines the diagnosis places in file `name` (a job of several files).
    """
    spans = wanted_spans(diagnosis, context, name, every=every)
    if not spans:
        return []
    texts: dict[int, str] = {}
    budget = MAX_WINDOW_LINES
    for chunk in iter_chunks(file, file=name):
        first, last = chunk.first_line, chunk.first_line + chunk.newlines
        inside = [(max(s, first), min(e, last)) for s, e in spans if s <= last and e >= first]
        if not inside:
            continue
        physical = chunk.data.split(b"\n")
        for start, end in inside:  # only the wanted lines of the chunk, not every line of it
            for no in range(start, end + 1):
                i = no - first
                if (i == 0 and chunk.mid_frame) or no in texts or budget <= 0:
                    continue
                frames = [f for f in physical[i].split(b"\r") if f.strip()] or [b""]
                texts[no] = decode(frames[-1])[0]
                budget -= 1
    file.seek(0)
    cuts = [(name, [(no, texts[no]) for no in range(start, end + 1) if no in texts]) for start, end in spans]
    return [cut for cut in cuts if cut[1]]


def excerpt_evidence_windows(excerpt: Excerpt, diagnosis: Diagnosis, *, context: int, name: str | None) -> list[Cut]:
    """`evidence_windows` for an excerpt: the lines it holds around the evidence, by original number."""
    cuts: list[Cut] = []
    budget = MAX_WINDOW_LINES
    for span in excerpt_windows(excerpt, wanted_spans(diagnosis, context)):
        lines = []
        for no, text in span[: max(0, budget)]:
            frames = [f for f in strip_ansi(text.encode("utf-8", errors="replace")).split(b"\r") if f.strip()]
            lines.append((no, decode(frames[-1] if frames else b"")[0]))
        budget -= len(lines)
        if lines:
            cuts.append((name, lines))
    return cuts


def redact_windows(cuts: list[Cut], redactor: Redactor) -> list[Window]:
    """Context windows with secrets replaced; a PEM key spanning lines of a window goes whole."""
    windows = []
    for name, lines in cuts:
        # The window as one block: one scan finds the few lines a rule could touch.
        texts = redactor.text("\n".join(text for _, text in lines)).text.split("\n")
        # Built once, from values made here: nothing to validate.
        kept = [WindowLine.model_construct(no=no, text=text) for (no, _), text in zip(lines, texts, strict=True)]
        windows.append(Window.model_construct(file=name, lines=kept))
    return windows


def keep(
    logs: Logs,
    library: Library,
    *,
    top: int | None,
    context: int,
    keep_log: bool,
    redactor: Redactor = DEFAULT,
    excerpt: Excerpt | None = None,
    threads: int = 2,
) -> StoredDiagnosis:
    """Check, hash, diagnose and redact the logs of one job: the diagnosis and what is kept of it (blocking).

    Several logs (one per rank) are diagnosed as one job, each keeping its name and line numbers.
    With `excerpt` (lines picked out of a larger log; the one file holds their text), line numbers
    and sizes in the diagnosis are the original log's. `threads` scan one large log at once.
    """
    # By name (distinct when there are several): the hash and the kept log never depend on upload order.
    logs = sorted(logs, key=lambda log: log[0] or "")
    for _, file in logs:
        check_text(file.read(SNIFF))
        file.seek(0)
    size, sha256 = _hash([file for _, file in logs])
    logs = [(redactor.line(name).text if name is not None else None, file) for name, file in logs]
    started = time.perf_counter()
    if excerpt is not None:
        diagnosis = diagnose_excerpt(excerpt, library, top=top, name=logs[0][0], redactor=redactor, threads=threads)
    elif len(logs) == 1:
        diagnosis = diagnose(logs[0][1], library, top=top, name=logs[0][0], redactor=redactor, threads=threads)
    else:
        diagnosis = diagnose_many(logs, library, top=top, redactor=redactor, threads=threads)
    seconds = time.perf_counter() - started
    cuts: list[Cut] = []
    for name, file in logs:
        file.seek(0)
        if excerpt is not None:
            cuts += excerpt_evidence_windows(excerpt, diagnosis, context=context, name=name)
        else:
            cuts += evidence_windows(file, diagnosis, context=context, name=name, every=len(logs) == 1)
    windows = redact_windows(cuts, redactor)
    log_gz, log_counts = compress_redacted(logs, redactor) if keep_log else (None, {})
    counts = shown_redactions(diagnosis.candidates, diagnosis.unexplained, diagnosis.input.files, windows, log_counts)
    return StoredDiagnosis.keeping(
        diagnosis,
        redactions=counts,
        windows=windows,
        input_bytes=size,
        input_sha256=sha256,
        log_gz=log_gz,
        seconds=seconds,
    )
