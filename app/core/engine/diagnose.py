"""`diagnose()`: the one entry point of the core, used by the CLI, the web app and the tests."""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime

from app.core.engine.advice import setting_of
from app.core.engine.ending import run_ending
from app.core.engine.environment import VERSIONED, on_one_node, read_environment, versions_of
from app.core.engine.file_scan import FileScan
from app.core.engine.hangs import hang_suspect
from app.core.engine.job import arrange, picked_lines
from app.core.engine.lead import neighbour_lead
from app.core.engine.left_over import harmless, unexplained, unrecognised_start
from app.core.engine.matcher import scan_file
from app.core.engine.nccl_ranks import STATING, lend_nccl_ranks
from app.core.engine.ranker import find_signatures, rank_found
from app.core.engine.reader import Source, iter_blocks, source_name
from app.core.engine.stall import stalled_start
from app.core.knowledge.loading import Library
from app.core.models import (
    Candidate,
    Diagnosis,
    InputInfo,
    SimilarEntry,
    Unexplained,
    UnknownStart,
    Window,
    entry_path,
)
from app.core.redaction.redactor import DEFAULT, Redactor, count_placeholders
from app.errors import EmptyLog

Progress = Callable[[str | None, int], None]  # a source's name, its bytes scanned so far


def scan_sources(
    sources: Sequence[tuple[str | None, Source]],
    library: Library,
    *,
    redactor: Redactor = DEFAULT,
    threads: int = 2,
    progress: Progress | None = None,
) -> list[FileScan]:
    """One pass of the library over each source (file names and picked-out lines redacted).

    `progress` is told each source's name and the bytes of it scanned so far, as they grow.
    """
    scans = []
    for i, (name, source) in enumerate(sources):
        shown = redactor.line(name).text if name else name
        chunks = iter_blocks(source, file=shown)
        told = None if progress is None else functools.partial(progress, name)
        scans.append(scan_file(library, chunks, name=shown, index=i, redactor=redactor, threads=threads, progress=told))
    return scans


def indexed_text(sources: Sequence[tuple[str | None, Source]], library: Library) -> str:
    """What a labelled log is indexed by for leads: the lines a scan of it keeps (its ends, every picked line)."""
    return "\n".join(line.text for scan in scan_sources(sources, library, threads=1) for line in picked_lines(scan))


def diagnose(
    source: Source,
    library: Library,
    *,
    top: int | None = None,
    name: str | None = None,
    redactor: Redactor = DEFAULT,
    threads: int = 2,
    written: datetime | None = None,
) -> Diagnosis:
    """Diagnose one log: a path, bytes or a binary stream. Secrets never reach the result.

    `threads` scan a large log's chunks at once (the engine runs without the GIL); `written`,
    when the log was last written (its file's modification time), dates year-less times when
    the log itself gives no year.
    """
    return diagnose_many(
        [(name if name is not None else source_name(source), source)],
        library,
        top=top,
        redactor=redactor,
        threads=threads,
        written=written,
    )


def diagnose_many(
    sources: Sequence[tuple[str | None, Source]],
    library: Library,
    *,
    top: int | None = None,
    redactor: Redactor = DEFAULT,
    threads: int = 2,
    written: datetime | None = None,
    progress: Progress | None = None,
    unlike: Collection[str] = (),
) -> Diagnosis:
    """Diagnose the logs of one job (e.g. one file per rank) as a whole (`progress`: as `scan_sources`;
    `unlike`: as `assemble`)."""
    scans = scan_sources(sources, library, redactor=redactor, threads=threads, progress=progress)
    if not any(s.bytes for s in scans) or all(s.blank for s in scans):
        raise EmptyLog("the log is empty: there is nothing to diagnose")
    return assemble(scans, library, top=top, written=written, unlike=unlike)


def assemble(
    scans: Sequence[FileScan],
    library: Library,
    *,
    top: int | None = None,
    written: datetime | None = None,
    unlike: Collection[str] = (),
) -> Diagnosis:
    """Rank what the scans found into a `Diagnosis` (`written`: when the logs were last written).

    `unlike`: sources whose corpus logs are not offered as a lead (a corpus case is not its own).
    """
    scans = arrange(scans, written)
    lend_nccl_ranks(scans, [idx for idx in library.kinds["version"] if library.rules[idx][0].name in STATING])
    environment = read_environment(library, scans)
    versions = versions_of(environment)
    found, _ = find_signatures(library, scans, versions)
    benign = [f for f in found if f.sig.role == "benign"]
    setting = setting_of(environment)
    candidates = rank_found(
        [f for f in found if f.sig.role != "benign"], scans, one_node=on_one_node(environment, scans), setting=setting
    )
    if top is not None:
        candidates = candidates[:top]
    ending = run_ending(candidates, scans)  # read before a stall is offered: a stall is a reading of the ending
    if not candidates and top != 0 and (stalled := stalled_start(scans, library, setting)) is not None:
        candidates = [stalled]  # nothing found, and the log ends in a start-up phase that never finished
    # How far to trust each named signature: what the corpus measured, said where the decision is made.
    measured = library.measured
    candidates = [c.model_copy(update={"trust": measured[c.id].short()}) if c.id in measured else c for c in candidates]
    unexplained_lines = unexplained(library, scans, (f.sig.id for f in found))
    finished = ending is not None and ending.state == "completed"
    start = with_similar(unrecognised_start(candidates, unexplained_lines, finished=finished), library)
    if not candidates and top != 0 and start is not None:  # an error line nothing recognised
        lead = neighbour_lead(scans, library, setting, unlike=unlike)
        candidates = [lead] if lead is not None else candidates
    # Once arranged, times are all full or (no year anywhere in the job) all year-less.
    # The ends of each file and every line a pattern picked: a file's last chunk may be short.
    times = sorted(line.time for scan in scans for line in picked_lines(scan) if line.time is not None)
    ranks = sorted({e.rank for c in candidates for e in c.evidence if e.rank is not None})
    cut = {(s.index, h.line.no) for s in scans for ph in s.hits.values() for h in ph.first if h.line.cut}
    read = {(s.index, line.no): line for s in scans for line in picked_lines(s)}.values()
    # Its parts are validated models and new lists of them: validating them again would only
    # build Diagnosis's schema, which a text report never needs (JSON builds it when asked).
    # So is InputInfo: counts, names, and the times of lines validated already.
    return Diagnosis.model_construct(
        library_version=library.version,
        input=InputInfo.model_construct(
            bytes=sum(s.bytes for s in scans),
            lines=sum(s.lines for s in scans),
            files=[s.name for s in scans if s.name],
            ranks=ranks,
            start=times[0] if times else None,
            end=times[-1] if times else None,
            cut_lines=len(cut),
            unreadable_lines=sum(1 for line in read if "\ufffd" in line.text),
            rejoined_lines=sum(1 for line in read if line.rewrapped),
            untagged_lines=sum(1 for line in read if line.untagged),
            versions={name: fact.value for name, fact in versions.items() if name in VERSIONED},
        ),
        candidates=candidates,
        unexplained=unexplained_lines,
        unrecognised_start=start,
        hang=hang_suspect(candidates, scans, library),
        harmless=harmless(benign),
        ending=ending,
        environment=environment,
        redactions=shown_redactions(candidates, unexplained_lines, [s.name for s in scans]),
    )


def shown_redactions(
    candidates: Sequence[Candidate],
    unexplained_lines: Sequence[Unexplained],
    names: Sequence[str | None],
    windows: Sequence[Window] = (),
    log_counts: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Secrets removed from what a diagnosis shows and keeps (each log line counted once), by type.

    `windows` are the context lines kept around the evidence, `log_counts` what redacting the whole
    kept log removed (its lines include the shown ones: a type counts the larger of the two).
    """
    texts: dict[tuple[str | None, int], str] = {}
    for candidate in candidates:
        for e in candidate.evidence:
            texts[(e.file, e.line)] = e.text
    for u in unexplained_lines:
        texts[(u.file, u.line)] = u.text
    for w in windows:
        for line in w.lines:
            texts[(w.file, line.no)] = line.text
    ordered = [texts[k] for k in sorted(texts, key=lambda k: (k[0] or "", k[1]))]
    counts = count_placeholders([*ordered, *(n for n in names if n)])
    for kind, n in (log_counts or {}).items():
        counts[kind] = max(counts.get(kind, 0), n)
    return dict(sorted(counts.items()))


def with_similar(start: UnknownStart | None, library: Library) -> UnknownStart | None:
    """An unrecognised start with the library entries worded most like it (leads, not matches)."""
    if start is None:
        return None
    similar = [
        SimilarEntry(id=sid, title=library.signatures[sid].title, path=entry_path(sid), score=score)
        for sid, score in library.similar.nearest(start.text)
    ]
    return start.model_copy(update={"similar": similar})
