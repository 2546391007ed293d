"""Render a `Diagnosis` as terminal text or Markdown (pure functions)."""

from __future__ import annotations

from collections.abc import Iterable

from app.core.models import Candidate, Diagnosis, Evidence

_ROLE_ORDER = ("initiating", "contributing", "collateral")


def _where(c: Candidate | Evidence) -> str:
    parts = []
    if c.file:
        parts.append(c.file)
    parts.append(f"line {c.line}")
    if c.rank is not None:
        parts.append(f"rank {c.rank}")
    if c.time is not None:
        parts.append(c.time.isoformat(sep=" "))
    return ", ".join(parts)


def _mark(e: Evidence) -> str:
    start, end = e.span
    if end <= start:
        return e.text
    return f"{e.text[:start]}»{e.text[start:end]}«{e.text[end:]}"


def _groups(d: Diagnosis) -> tuple[list[Candidate], list[Candidate], list[Candidate]]:
    terminal = [c for c in d.candidates if c.episode == "terminal"]
    main = [c for c in terminal if c.role != "collateral"]
    echoes = [c for c in terminal if c.role == "collateral"]
    earlier = [c for c in d.candidates if c.episode == "earlier"]
    return main, echoes, earlier


def render_text(d: Diagnosis) -> str:
    """What a person reads in a terminal: the initiating failure first, echoes grouped below."""
    out: list[str] = []
    size = f"{d.input.lines:,} lines, {d.input.bytes:,} bytes"
    if not d.candidates:
        out.append(f"No known failure found ({size}).")
    main, echoes, earlier = _groups(d)
    for c in main:
        label = "INITIATING" if c.role == "initiating" else "ALSO FAILED"
        out += [
            "",
            f"{label}: {c.title} [{c.id}]  {c.band}, confidence {c.confidence:.2f}",
            f"  at {_where(c)}",
        ]
        out.append(f"  {c.summary}")
        if c.facts:
            out.append("  facts: " + ", ".join(f"{k}={v}" for k, v in c.facts.items()))
        out.append("  evidence:")
        out += [f"    {e.line:>8} | {_mark(e)}" for e in c.evidence]
        out.append("  fix:")
        out += [f"    {i}. {step}" for i, step in enumerate(c.fix, 1)]
        out += [f"  verify: {c.verify}", f"  resume: {c.resume}", f"  more: {c.path}"]
    if echoes:
        out += ["", "COLLATERAL (echoes of the failure above):"]
        out += [f"  - {c.title} [{c.id}] at {_where(c)}, {c.count} lines: {c.why}" for c in echoes]
    if earlier:
        out += ["", "EARLIER TROUBLE (the run went on after it):"]
        out += [f"  - {c.title} [{c.id}] at {_where(c)}: {c.why}" for c in earlier]
    if d.unexplained:
        out += ["", "UNEXPLAINED ERROR LINES:"]
        out += [f"  {u.line:>8} | {u.text}" + (f"  (x{u.count})" if u.count > 1 else "") for u in d.unexplained]
    out += ["", f"Read {size}; library {d.library_version}."]
    return "\n".join(out).lstrip("\n") + "\n"


def _md_evidence(evidence: Iterable[Evidence]) -> list[str]:
    lines = ["```text"]
    lines += [f"{e.line:>8} | {e.text}" for e in evidence]
    return [*lines, "```"]


def render_markdown(d: Diagnosis, *, permalink: str | None = None, base_url: str = "") -> str:
    """A report for a PR comment, a CI job summary or a chat message."""
    out = ["## Tracelore diagnosis", ""]
    main, echoes, earlier = _groups(d)
    if not d.candidates:
        out.append(f"No known failure found in {d.input.lines:,} lines.")
    for c in main:
        head = "Initiating failure" if c.role == "initiating" else "Also failed"
        out += [f"### {head}: [{c.title}]({base_url}{c.path}) `{c.id}`", ""]
        out += [f"**{c.band}** (confidence {c.confidence:.2f}) at {_where(c)}", "", c.summary, ""]
        if c.facts:
            out += ["| fact | value |", "|---|---|"] + [f"| {k} | `{v}` |" for k, v in c.facts.items()] + [""]
        out += _md_evidence(c.evidence) + ["", "**Fix**", ""]
        out += [f"{i}. {step}" for i, step in enumerate(c.fix, 1)]
        out += ["", f"**Verify:** {c.verify}", "", f"**Resume:** {c.resume}", ""]
    if echoes:
        out += ["<details><summary>Collateral: echoes of the failure above</summary>", ""]
        out += [f"- `{c.id}` {c.title} at {_where(c)}: {c.why}" for c in echoes]
        out += ["", "</details>", ""]
    if earlier:
        out += ["**Earlier trouble** (the run went on after it):", ""]
        out += [f"- `{c.id}` {c.title} at {_where(c)}" for c in earlier]
        out.append("")
    if d.unexplained:
        out += ["**Unexplained error lines**", ""] + _md_evidence_plain(d) + [""]
    if permalink:
        out += [f"Full diagnosis: {permalink}", ""]
    out.append(f"<sub>library {d.library_version}, {d.input.lines:,} lines read</sub>")
    return "\n".join(out) + "\n"


def _md_evidence_plain(d: Diagnosis) -> list[str]:
    lines = ["```text"]
    lines += [f"{u.line:>8} | {u.text}" + (f"  (x{u.count})" if u.count > 1 else "") for u in d.unexplained]
    return [*lines, "```"]
