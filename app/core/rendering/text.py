"""Render a `Diagnosis` as terminal text or Markdown (pure functions)."""

from __future__ import annotations

from collections.abc import Iterable

from app.core.engine.environment import where
from app.core.models import (
    Candidate,
    Diagnosis,
    Evidence,
    HangLine,
    Harmless,
    Unexplained,
    UnknownStart,
)
from app.core.rendering.verdict import ending_sentence, quiet_heading, trust, verdict
from app.core.times import comparable, span

_ROLE_ORDER = ("initiating", "contributing", "collateral")


def _where(c: Candidate | Evidence | Harmless) -> str:
    parts = []
    if c.file:
        parts.append(c.file)
    parts.append(f"line {c.line}")
    if c.rank is not None:
        parts.append(f"rank {c.rank}")
    if c.time is not None:
        parts.append(c.time.isoformat(sep=" "))
    if isinstance(c, Candidate) and (since := began_note(c)):
        parts.append(since)
    return ", ".join(parts)


def began_note(c: Candidate) -> str | None:
    """ "began 03:04:21, 10 min earlier" when the failure's own line dates its start."""
    if c.began is None or c.time is None or not comparable(c.began, c.time):
        return None
    return f"began {c.began.isoformat(sep=' ', timespec='seconds')}, {span((c.time - c.began).total_seconds())} earlier"


def merged_spans(text: str, spans: Iterable[tuple[int, int]]) -> list[list[int]]:
    """The union of the spans, cut to the text, as sorted [start, end] pairs that do not overlap."""
    merged: list[list[int]] = []
    for start, end in sorted((max(0, s), min(e, len(text))) for s, e in spans):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def _mark(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """The line with every matched span between » and « (overlapping spans merged)."""
    out, pos = [], 0
    for start, end in merged_spans(text, spans):
        out += [text[pos:start], "»", text[start:end], "«"]
        pos = end
    return "".join(out) + text[pos:]


def group_evidence(evidence: Iterable[Evidence]) -> list[tuple[Evidence, list[tuple[int, int]]]]:
    """One entry per evidence line (patterns hitting the same line share it), with all its spans."""
    lines: dict[tuple[str | None, int], tuple[Evidence, list[tuple[int, int]]]] = {}
    for e in evidence:
        lines.setdefault((e.file, e.line), (e, []))[1].append(e.span)
    return list(lines.values())


def _line_label(e: Evidence | Unexplained | UnknownStart | HangLine, several: bool) -> str:
    """The line number, with the file name when the diagnosis spans several files."""
    return f"{e.file}:{e.line}" if several and e.file else f"{e.line:>8}"


def environment_lines(d: Diagnosis) -> list[str]:
    """The environment in one line per fact: `PyTorch: 2.1.0+cu121 (line 3, rank 0)`."""
    several = len(d.input.files) > 1
    return [
        f"{label}: " + "; ".join(f"{f.value} ({where(f, several)})" for f in facts)
        for label, facts in d.environment.grouped()
    ]


def count(n: int, word: str) -> str:
    """'1 line', '2 lines', '1,024 bytes'."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _upper(sentence: str) -> str:
    return sentence[:1].upper() + sentence[1:]


def render_text(d: Diagnosis, *, base_url: str = "") -> str:
    """What a person reads in a terminal: the initiating failure first, echoes grouped below.

    With `base_url`, encyclopedia links are full addresses a terminal can open.
    """
    out: list[str] = []
    several = len(d.input.files) > 1
    size = f"{count(d.input.lines, 'line')}, {count(d.input.bytes, 'byte')}"
    if not d.candidates:
        out.append(f"{quiet_heading(d)} ({size}).")
        if d.ending is not None:
            out.append(_upper(ending_sentence(d.ending, several)))
    else:
        out.append(verdict(d))
        out += [line for line in [trust(d)] if line]
    out += [f"Note: {note}" for note in d.input.reading_notes()]
    main, echoes, earlier = d.groups()
    if echoes and not main:
        out += [
            "",
            "INITIATING: not recognised. Only echoes of a failure were found;"
            " what started the run is not one Tracelore knows.",
        ]
        if d.unrecognised_start:
            u = d.unrecognised_start
            out += [
                f"  most likely start: {_line_label(u, several).strip()}"
                + (f", rank {u.rank}" if u.rank is not None else ""),
                f"    {u.text}",
                f"  why: {u.why}",
            ]
            if u.similar:
                out.append(
                    "  similar entries (worded like it, not matched): "
                    + ", ".join(f"{s.id} ({s.title})" for s in u.similar)
                )
    elif not d.candidates and d.unrecognised_start:
        u = d.unrecognised_start
        out += [
            "",
            "NOT RECOGNISED: no signature explains the log's error; it is not one Tracelore knows.",
            f"  first error, line {u.line}"
            + (f" of {u.file}" if several and u.file else "")
            + (f", rank {u.rank}" if u.rank is not None else "")
            + ":",
            f"    {u.text}",
        ]
        if u.similar:
            similar = ", ".join(f"{s.id} ({s.title})" for s in u.similar)
            out.append(f"  similar entries (worded like it, not matched): {similar}")
    for c in main:
        label = "INITIATING" if c.role == "initiating" else "ALSO FAILED"
        if c.basis == "neighbours":
            label = "LEAD (not recognised; like other logs)"
        out += [
            "",
            f"{label}: {c.title} [{c.id}]  {c.band}, confidence {c.confidence:.2f}",
            f"  at {_where(c)}",
        ]
        if c.basis == "neighbours":
            out.append(f"  why: {c.why}")
        out.append(f"  {c.summary}")
        if c.facts:
            out.append("  facts: " + ", ".join(f"{k}={v}" for k, v in c.facts.items()))
        out += [f"  versions: {text}" for text in c.versions]
        out.append("  evidence:")
        out += [f"    {_line_label(e, several)} | {_mark(e.text, spans)}" for e, spans in group_evidence(c.evidence)]
        out.append("  fix:")
        out += [f"    {i}. {step}" for i, step in enumerate(c.fix, 1)]
        if c.verify_command:  # the command alone on its line, to copy; what it shows below it
            out += [f"  verify: {c.verify_command}", f"          {c.verify_explain}"]
        else:
            out.append(f"  verify: {c.verify}")
        out += [f"  resume: {c.resume}", f"  more: {base_url.rstrip('/')}{c.path}"]
    if d.environment.conflicts:
        out += ["", "ENVIRONMENT CONFLICTS (proven by the log's own lines):"]
        out += [f"  - {c.summary}" for c in d.environment.conflicts]
    if d.hang:
        out += ["", f"SUSPECT RANK: {d.hang.rank} (the rank the others were waiting for when they timed out)"]
        out.append(f"  why: {d.hang.why}")
        out += [
            f"    {_line_label(e, several)} | " + (f"[rank {e.rank}] " if e.rank is not None else "") + e.text
            for e in d.hang.evidence
        ]
    if echoes:
        out += ["", "COLLATERAL (echoes of the failure above):"]
        out += [f"  - {c.title} [{c.id}] at {_where(c)}, {count(c.count, 'line')}: {c.why}" for c in echoes]
    if earlier:
        out += ["", "EARLIER TROUBLE (the run went on after it):"]
        out += [f"  - {c.title} [{c.id}] at {_where(c)}: {c.why}" for c in earlier]
    if d.harmless:
        out += ["", "HARMLESS (known lines that look alarming but are not the failure):"]
        out += [f"  - {h.title} [{h.id}] at {_where(h)}, {count(h.count, 'line')}: {h.text[:160]}" for h in d.harmless]
    if d.unexplained:
        out += ["", "UNEXPLAINED ERROR LINES:"]
        out += [
            f"  {_line_label(u, several)} | {u.text}" + (f"  (x{u.count})" if u.count > 1 else "")
            for u in d.unexplained
        ]
    if d.environment.facts:
        out += ["", "ENVIRONMENT (as the log states it):"]
        out += [f"  {line}" for line in environment_lines(d)]
    out += ["", f"Read {size}; library {d.library_version}."]
    return "\n".join(out).lstrip("\n") + "\n"


def _fence(lines: list[str], language: str = "text") -> list[str]:
    """A fenced code block that no backtick run inside the lines can close early."""
    ticks = "`" * max(3, *(_ticks(line) + 1 for line in lines))
    return [f"{ticks}{language}", *lines, ticks]


def _ticks(line: str) -> int:
    best = run = 0
    for ch in line:
        run = run + 1 if ch == "`" else 0
        best = max(best, run)
    return best


def _cell(value: str) -> str:
    """A table cell value as inline code: pipes escaped, backticks cannot end it early."""
    ticks = "`" * (_ticks(value) + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    escaped = value.replace("|", "\\|")
    return f"{ticks}{pad}{escaped}{pad}{ticks}"


def render_markdown(d: Diagnosis, *, permalink: str | None = None, base_url: str = "") -> str:
    """A report for a PR comment, a CI job summary or a chat message.

    Encyclopedia titles link to the service only when its address (base_url) is known:
    a relative link would point into the forge that shows the report.
    """
    out = ["## Tracelore diagnosis", ""]
    several = len(d.input.files) > 1
    if permalink:
        out += [f"Full diagnosis: {permalink}", ""]
    main, echoes, earlier = d.groups()
    if not d.candidates:
        if d.ending is None:
            out += [f"No known failure found in {count(d.input.lines, 'line')}.", ""]
        else:
            out += [
                f"**{quiet_heading(d)}** ({count(d.input.lines, 'line')})",
                "",
                _upper(ending_sentence(d.ending, several)),
                "",
            ]
    else:
        out += [f"**{verdict(d)}**", ""] + [f"{line}" for line in [trust(d)] if line] + ([""] if trust(d) else [])
    out += [f"> {note}" for note in d.input.reading_notes()] + ([""] if d.input.reading_notes() else [])
    if echoes and not main:
        out += [
            "### Initiating failure: not recognised",
            "",
            "Only echoes of a failure were found; what started the run is not one Tracelore knows.",
            "",
        ]
        if d.unrecognised_start:
            u = d.unrecognised_start
            out += [f"Most likely start ({u.why}):", ""]
            out += _fence([f"{_line_label(u, several)} | {u.text}"]) + [""]
            if u.similar:
                links = [f"[{s.title}]({base_url.rstrip('/')}{s.path})" if base_url else s.title for s in u.similar]
                out += ["Similar entries (worded like it, not matched): " + "; ".join(links), ""]
    elif not d.candidates and d.unrecognised_start:
        u = d.unrecognised_start
        out += ["### Not recognised", "", "No signature explains the log's error; it is not one Tracelore knows.", ""]
        out += [f"First error ({u.why}):", ""] + _fence([f"{_line_label(u, several)} | {u.text}"]) + [""]
        if u.similar:
            links = [f"[{s.title}]({base_url.rstrip('/')}{s.path})" if base_url else s.title for s in u.similar]
            out += ["Similar entries (worded like it, not matched): " + "; ".join(links), ""]
    for c in main:
        head = "Initiating failure" if c.role == "initiating" else "Also failed"
        if c.basis == "neighbours":
            head = "Lead (not recognised; like other logs)"
        title = f"[{c.title}]({base_url.rstrip('/')}{c.path})" if base_url else c.title
        out += [f"### {head}: {title} `{c.id}`", ""]
        out += [f"**{c.band}** (confidence {c.confidence:.2f}) at {_where(c)}", ""]
        if c.basis == "neighbours":
            out += [f"A lead, not a match: {c.why}.", ""]
        out += [c.summary, ""]
        if c.facts:
            out += ["| fact | value |", "|---|---|"] + [f"| {k} | {_cell(v)} |" for k, v in c.facts.items()] + [""]
        if c.versions:
            out += [f"> {text}" for text in c.versions] + [""]
        out += _fence([f"{_line_label(e, several)} | {e.text}" for e, _ in group_evidence(c.evidence)])
        out += ["", "**Fix**", ""]
        out += [f"{i}. {step}" for i, step in enumerate(c.fix, 1)]
        if c.verify_command:  # the command alone in its block, to copy; what it shows outside it
            out += ["", "**Verify:**", "", *_fence([c.verify_command], "sh"), "", f"{c.verify_explain}"]
        else:
            out += ["", f"**Verify:** {c.verify}"]
        out += ["", f"**Resume:** {c.resume}", ""]
    if d.environment.conflicts:
        out += ["**Environment conflicts** (proven by the log's own lines):", ""]
        out += [f"- {c.summary}" for c in d.environment.conflicts] + [""]
    if d.hang:
        out += [f"### Suspect rank: {d.hang.rank}", "", f"The rank the others were waiting for: {d.hang.why}.", ""]
        if d.hang.evidence:
            out += _fence([f"{_line_label(e, several)} | {e.text}" for e in d.hang.evidence]) + [""]
    if echoes:
        out += ["<details><summary>Collateral: echoes of the failure above</summary>", ""]
        out += [f"- `{c.id}` {c.title} at {_where(c)}: {c.why}" for c in echoes]
        out += ["", "</details>", ""]
    if earlier:
        out += ["**Earlier trouble** (the run went on after it):", ""]
        out += [f"- `{c.id}` {c.title} at {_where(c)}" for c in earlier]
        out.append("")
    if d.harmless:
        out += ["**Harmless lines** (they look alarming but are not the failure):", ""]
        out += [f"- `{h.id}` {h.title} at {_where(h)}" for h in d.harmless]
        out.append("")
    if d.unexplained:
        out += ["**Unexplained error lines**", ""]
        out += _fence(
            [
                f"{_line_label(u, several)} | {u.text}" + (f"  (x{u.count})" if u.count > 1 else "")
                for u in d.unexplained
            ]
        )
        out.append("")
    if d.environment.facts:
        out += ["<details><summary>Environment (as the log states it)</summary>", ""]
        out += ["| fact | value (where) |", "|---|---|"]
        out += [f"| {line.split(': ', 1)[0]} | {_cell(line.split(': ', 1)[1])} |" for line in environment_lines(d)]
        out += ["", "</details>", ""]
    out.append(f"<sub>library {d.library_version}, {count(d.input.lines, 'line')} read</sub>")
    return "\n".join(out) + "\n"
