"""Direct RE2 calls agree with the `re2` module's own search, in characters."""

from __future__ import annotations

import pytest

from app.core.knowledge.loading import compile_re2, compile_text
from app.core.patterns.re2calls import find, search_text

CASES = [
    (r"(?P<a>é+)x(?P<b>\d+)?(?P<c>z)?", "ab ééx12 tail"),
    (
        r"CUDA out of memory\. Tried to allocate (?P<size>[\d.]+ [KMGT]iB)",
        "日本 CUDA out of memory. Tried to allocate 2.00 GiB",
    ),
    (r"^\s*Killed\s*$", "  Killed "),
    (r"(?P<x>\w+)$", "naïve café"),
    (r"nothing here", "a line"),
]


@pytest.mark.parametrize(("pattern", "text"), CASES)
def test_search_text_matches_the_wrapper(pattern: str, text: str) -> None:
    compiled = compile_text(pattern)
    ours, theirs = search_text(compiled, text), compiled.search(text)
    if theirs is None:
        assert ours is None
        return
    assert ours is not None and ours.span == theirs.span()
    assert ours.groups == {k: v for k, v in theirs.groupdict().items() if v is not None}


def test_find_reads_a_range_of_a_buffer_without_copying() -> None:
    data = b"first line\nKilled\nlast\n"
    compiled = compile_re2(r"^Killed$")
    assert find(compiled, memoryview(data)) == 11
    assert find(compiled, data, 12) == -1
    assert find(compiled, data, 0, 10) == -1
