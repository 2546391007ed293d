"""The verdict: one sentence every report opens with, before any detail.

What failed first, on which rank (and file, when the job has several), when, what followed it,
the rank a hang waited for, and how sure. In distributed debugging the rank is the answer, so it
comes before the class's explanation, not 25 lines below it.
"""

from __future__ import annotations

from app.core.models import Candidate, Diagnosis, RunEnding


def _ranks(ranks: list[int]) -> str:
    shown = sorted(set(ranks))
    text = ", ".join(map(str, shown[:8])) + (f" and {len(shown) - 8} more" if len(shown) > 8 else "")
    return f"rank {text}" if len(shown) == 1 else f"ranks {text}"


def _first(c: Candidate, several_files: bool) -> str:
    parts = [c.title]
    if c.rank is not None:
        parts.append(f"on rank {c.rank}")
    if c.time is not None:
        parts.append(f"at {c.time.isoformat(sep=' ', timespec='seconds')}")
    where = f"{c.file}, line {c.line}" if several_files and c.file else f"line {c.line}"
    return " ".join(parts) + f", {where}"


def verdict(d: Diagnosis) -> str:
    """One line that says what happened, for the top of every report."""
    main, echoes, _ = d.groups()
    several = len(d.input.files) > 1
    if not main:
        if echoes:
            start = d.unrecognised_start
            where = ""
            if start is not None:
                where = f": most likely line {start.line}" + (
                    f" on rank {start.rank}" if start.rank is not None else ""
                )
            return (
                f"Verdict: only echoes of a failure were found; what started the run is not one Tracelore knows{where}."
            )
        start = d.unrecognised_start
        if start is not None:
            where = f"line {start.line}" + (f" on rank {start.rank}" if start.rank is not None else "")
            return f"Verdict: no known failure found; the log's first error ({where}) is not one Tracelore knows."
        if d.ending is None:
            return "Verdict: no known failure found."
        said = "looks healthy" if d.ending.state == "completed" else "no error found"
        return f"Verdict: {said}: {ending_sentence(d.ending, several)}"
    first = main[0]
    if first.basis == "neighbours":
        start = d.unrecognised_start
        said = "nothing is recognised"
        if start is not None:
            where = f"line {start.line}" + (f" on rank {start.rank}" if start.rank is not None else "")
            said = f"the log's first error ({where}) is not one Tracelore knows"
        return (
            f"Verdict: no known failure found; {said}; logs like it in public threads were {first.title} "
            f"({first.id}): a lead, not a match ({first.band}, confidence {first.confidence:.2f})."
        )
    sentence = f"Verdict: {_first(first, several)}"
    echo_ranks = [r for e in echoes for r in (e.ranks or ([e.rank] if e.rank is not None else []))]
    others = [r for r in echo_ranks if r != first.rank]
    if echoes:
        count = len(echoes)
        sentence += f"; then {count} echo{'es' if count > 1 else ''} of it" + (
            f" on {_ranks(others)}" if others else ""
        )
    if d.hang is not None:
        sentence += f"; suspect rank {d.hang.rank}, which the others were waiting for"
    also = len(main) - 1
    if also:
        sentence += f"; {also} other failure{'s' if also > 1 else ''} at the same time"
    return sentence + f" ({first.band}, confidence {first.confidence:.2f})."


def quiet_heading(d: Diagnosis) -> str:
    """The heading of a report in which no failure was found: healthy, stopped, or nothing known."""
    if d.ending is None or d.unrecognised_start is not None:
        return "No known failure found"
    return "Looks healthy" if d.ending.state == "completed" else "No error: the log stops mid-run"


def ending_sentence(ending: RunEnding, several_files: bool = False) -> str:
    """What the end of a log without a failure says, naming the line that says it."""
    where = f"{ending.file}, line {ending.line}" if several_files and ending.file else f"line {ending.line}"
    if ending.rank is not None:
        where += f", rank {ending.rank}"
    if ending.state == "completed":
        return f"the run finished normally ({where}) and no failure was found."
    at = f"at step {ending.step} " if ending.step is not None else "on training progress "
    return (
        f"the log stops {at}({where}) without an error, so the run was killed from outside, "
        "is still running or hung, or the log was cut."
    )


def verdict_sentence(d: Diagnosis) -> str:
    """The verdict without its "Verdict:" label, as a sentence of its own."""
    said = verdict(d).removeprefix("Verdict: ")
    return said[:1].upper() + said[1:]


def trust(d: Diagnosis) -> str | None:
    """How far to trust the verdict's failure: what the corpus measured for its signature (None unmeasured)."""
    main, _, _ = d.groups()
    if not main or not main[0].trust:
        return None
    return f"How far to trust it: {main[0].trust}."
