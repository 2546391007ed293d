"""The evidence on the diagnosis page: spans are highlighted, merged and escaped."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from app.core import Library, diagnose
from app.core.models import Evidence
from app.core.stored import StoredDiagnosis
from app.web.diagnosis_view import by_line, diagnosis_context, marked


def test_marked_merges_overlaps_clamps_and_escapes() -> None:
    text = "<b>CUDA out of memory</b> & more"
    assert (
        marked(text, [(3, 7), (5, 21), (100, 120)]) == "&lt;b&gt;<mark>CUDA out of memory</mark>&lt;/b&gt; &amp; more"
    )
    assert marked("abc", []) == "abc"
    assert marked("abcdef", [(4, 6), (0, 1)]) == "<mark>a</mark>bcd<mark>ef</mark>"


def test_by_line_groups_patterns_matching_one_line() -> None:
    def ev(line: int, span: tuple[int, int]) -> Evidence:
        return Evidence(line=line, text=f"line {line}", span=span, pattern="p", kind="fingerprint")

    grouped = by_line([ev(3, (0, 2)), ev(3, (3, 4)), ev(1, (0, 1))])
    assert [(g.line, g.spans) for g in grouped] == [(3, ((0, 2), (3, 4))), (1, ((0, 1),))]


def test_the_diagnosis_page_gets_values_to_read_and_nothing_to_call(library: Library, tmp_path: Path) -> None:
    log = tmp_path / "rank3.log"
    log.write_text(
        "[rank3]: Traceback (most recent call last):\n"
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
        " GPU 3 has a total capacity of 79.15 GiB of which 1.2 GiB is free.\n"
    )
    record = StoredDiagnosis.keeping(diagnose(log, library), created_at=datetime(2026, 1, 2, tzinfo=UTC))
    context = diagnosis_context(record)
    assert not [name for name, value in context.items() if callable(value)]
    (view,) = [v for v in context["main"] if v.candidate.id == "cuda.oom"]
    assert "<mark>" in view.lines[0].html  # the evidence is marked before the template runs
