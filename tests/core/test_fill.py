"""Facts filled into fix texts: optional parts, never a bare `{name}`."""

from __future__ import annotations

from app.core.engine.fill import fill, named, required, template


def test_an_optional_part_shows_only_when_all_its_facts_are_known() -> None:
    text = "Lower the batch size[[ (the failing request was {requested})]][[ on rank {rank}]]."
    assert fill(text, {"requested": "2.00 GiB"}) == "Lower the batch size (the failing request was 2.00 GiB)."
    assert fill(text, {}) == "Lower the batch size."
    assert (
        fill(text, {"requested": "1 MiB", "rank": "3"})
        == "Lower the batch size (the failing request was 1 MiB) on rank 3."
    )


def test_code_braces_are_left_alone_and_the_encyclopedia_sees_every_part() -> None:
    text = 'Remap it, e.g. `map_location={"cuda:1": "cuda:0"}`[[ (the checkpoint asks for cuda:{device})]].'
    assert fill(text, {}) == 'Remap it, e.g. `map_location={"cuda:1": "cuda:0"}`.'
    assert (
        template(text) == 'Remap it, e.g. `map_location={"cuda:1": "cuda:0"}` (the checkpoint asks for cuda:{device}).'
    )
    assert named(text) == {"device"} and required(text) == set()
    assert required("Free port {port}[[ on {host}]]") == {"port"}
