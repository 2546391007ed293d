"""The evidence on the diagnosis page: spans are highlighted, merged and escaped."""

from __future__ import annotations

from app.core.models import Evidence
from app.web.diagnosis_view import by_line, marked


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
