"""What `tracelore lsp` shows of a diagnosis: diagnostics, hover text and document symbols (pure)."""

from __future__ import annotations

from collections.abc import Callable

from lsprotocol import types as lsp

from app.core import Candidate, Diagnosis
from app.lsp.docs import line_range

SOURCE = "tracelore"


def diagnostics_for(
    d: Diagnosis | None, name: str, entry_url: Callable[[Candidate], str | None]
) -> list[lsp.Diagnostic]:
    """The diagnostics of one document: its evidence lines, harmless lines and the unrecognised start."""
    if d is None:
        return []
    out: list[lsp.Diagnostic] = []
    for c in d.candidates:
        if c.episode == "earlier":
            severity = lsp.DiagnosticSeverity.Information
        elif c.role == "initiating":
            severity = lsp.DiagnosticSeverity.Error
        else:
            severity = lsp.DiagnosticSeverity.Warning
        label = {"initiating": "initiating failure", "collateral": "echo", "contributing": "also failed"}[c.role]
        if c.episode == "earlier":
            label = "earlier trouble the run survived"
        for e in c.evidence:
            if e.file != name:
                continue
            start, end = e.span if e.span != (0, 0) else (0, len(e.text))
            out.append(
                lsp.Diagnostic(
                    range=line_range(e.line, start, end),
                    message=f"{c.title} ({label}): {c.why}",
                    severity=severity,
                    code=c.id,
                    code_description=lsp.CodeDescription(href=url) if (url := entry_url(c)) else None,
                    source=SOURCE,
                    data={"id": c.id},
                )
            )
    for h in d.harmless:
        if h.file == name:
            out.append(
                lsp.Diagnostic(
                    range=line_range(h.line, 0, len(h.text)),
                    message=f"{h.title} (harmless): {h.summary}",
                    severity=lsp.DiagnosticSeverity.Information,
                    code=h.id,
                    source=SOURCE,
                )
            )
    u = d.unrecognised_start
    if u is not None and u.file == name:
        out.append(
            lsp.Diagnostic(
                range=line_range(u.line, 0, len(u.text)),
                message=f"Most likely start of the failure, not one Tracelore knows: {u.why}",
                severity=lsp.DiagnosticSeverity.Hint,
                source=SOURCE,
            )
        )
    return out


def explain(c: Candidate, url: str | None) -> str:
    """A hover's text for one failure: what, where, why, facts, fix, verify and its entry."""
    where = ", ".join(
        x for x in (f"rank {c.rank}" if c.rank is not None else "", f"line {c.line}", str(c.time or "")) if x
    )
    parts = [
        f"**{c.title}** `{c.id}`: {c.role}, {c.band} ({c.confidence:.2f})",
        f"{where}",
        c.summary,
        f"*Why {c.role}:* {c.why}",
    ]
    if c.facts:
        parts.append("**Facts:** " + ", ".join(f"{k}={v}" for k, v in c.facts.items()))
    if c.fix:
        parts.append("**Fix:**\n" + "\n".join(f"{i}. {step}" for i, step in enumerate(c.fix, 1)))
    if c.verify_command:  # the command alone in its block, to copy; what it shows outside it
        parts.append(f"**Verify:**\n```sh\n{c.verify_command}\n```\n{c.verify_explain}")
    elif c.verify:
        parts.append(f"**Verify:** {c.verify}")
    parts.append(
        f"[Encyclopedia entry]({url})" if url else f"Encyclopedia entry: `{c.path}` (set --base-url to link it)"
    )
    return "\n\n".join(parts)


def rank_symbols(d: Diagnosis, name: str) -> list[lsp.DocumentSymbol]:
    """One symbol per rank the document's evidence shows, holding the failures seen on it."""
    by_rank: dict[int | None, list[tuple[Candidate, int]]] = {}
    for c in d.candidates:
        lines = [e.line for e in c.evidence if e.file == name]
        if lines:
            rank = next((e.rank for e in c.evidence if e.file == name and e.rank is not None), None)
            by_rank.setdefault(rank, []).append((c, min(lines)))
    out = []
    for rank in sorted(by_rank, key=lambda r: (r is None, r or 0)):
        children = [
            lsp.DocumentSymbol(
                name=c.id,
                detail=f"{c.role}: {c.title}",
                kind=lsp.SymbolKind.Event,
                range=line_range(line, 0, 0),
                selection_range=line_range(line, 0, 0),
            )
            for c, line in sorted(by_rank[rank], key=lambda p: p[1])
        ]
        first, last = children[0].range.start.line, children[-1].range.start.line
        out.append(
            lsp.DocumentSymbol(
                name=f"rank {rank}" if rank is not None else "no rank",
                detail=", ".join(child.name for child in children),
                kind=lsp.SymbolKind.Namespace,
                range=lsp.Range(start=lsp.Position(line=first, character=0), end=lsp.Position(line=last, character=0)),
                selection_range=line_range(first + 1, 0, 0),
                children=children,
            )
        )
    return out
