"""The suspect rank of a hang, on the corpus's real logs: named where the log shows it, else none."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import regex

from app.core.engine.diagnose import diagnose_many
from app.core.engine.hangs import RECORDER, WAITING
from app.core.knowledge.loading import Library
from app.core.models import Diagnosis
from app.core.rendering.ci import render_github, render_junit, render_sarif
from app.core.rendering.text import render_markdown, render_text
from app.evaluation.corpus import load_case
from app.evaluation.evaluate import rank_files

CASES = Path(__file__).resolve().parents[1] / "corpus" / "cases"


def _diagnose(case_id: str, library: Library) -> Diagnosis:
    case = load_case(CASES / case_id)
    return diagnose_many([(p.name, p) for p in case.logs], library, threads=1)


# Generated hangs: each case.yaml's notes say which rank hung.
@pytest.mark.parametrize(
    ("case_id", "rank", "why"),
    [
        # Rank 1 of 2 sleeps; rank 0 times out in gloo; the launcher's summary lists rank 1.
        ("gen-dist-hang-rank1-gloo-timeout", 1, "rank 0 reports the collective timeout and rank 1 never does"),
        # Rank 3 of 4 stops after step 8; ranks 0-2 time out.
        ("gen-dist-hang-rank3-of-4", 3, "ranks 0, 1, 2 report the collective timeout and rank 3 never does"),
        # One file per rank: rank0.log ends silently at step 5, rank 1 times out (no times at all).
        ("gen-dist-per-rank-hang", 0, "rank 1 reports the collective timeout and rank 0 never does"),
        # Rank 0 runs a long evaluation; rank 1 waits and times out.
        ("gen-dist-slow-eval-rank0", 0, "rank 1 reports the collective timeout and rank 0 never does"),
        # Rank 2 of 3 straggles in evaluation while ranks 0-1 wait in all_gather_object.
        ("gen-dist-all-gather-object-straggler", 2, "ranks 0, 1 report the collective timeout and rank 2 never"),
        # Rank 0's monitored barrier names rank 1.
        ("gen-dist-monitored-barrier", 1, "rank 0 reports that rank 1 did not reach the barrier"),
    ],
)
def test_the_rank_that_hung_is_named(case_id: str, rank: int, why: str, shipped_library: Library) -> None:
    d = _diagnose(case_id, shipped_library)
    assert d.initiating is not None and d.initiating.id == "dist.gloo_timeout"
    assert d.hang is not None
    assert (d.hang.rank, d.hang.why[: len(why)]) == (rank, why)
    assert d.hang.evidence and all(e.rank != rank for e in d.hang.evidence), "the evidence is the waiting ranks' lines"
    assert "Timed out waiting" in d.hang.evidence[0].text or "monitoredBarrier" in d.hang.evidence[0].text


@pytest.mark.parametrize(
    "case_id",
    [
        # Upstream NCCL watchdog pastes: every rank shown times out on the same SeqNum with the same
        # last enqueued / last completed work, and no other rank appears: nothing tells.
        "gh-hiyouga-llamafactory-7396",
        "gh-hiyouga-llamafactory-6269",
        "gh-xpixelgroup-basicsr-737",
        "gh-mlfoundations-open-clip-1024",
        # One rank's watchdog times out, another's heartbeat monitor fires: that is no sign it was
        # the rank the first one waited for.
        "gh-snowflakedb-arctictraining-219",
        # Rank 0 alone reports both gloo and NCCL timeouts; no other rank is shown.
        "gh-peterande-d-fine-75",
        # Mismatched collectives: every rank of the job reports a gloo timeout, none is missing.
        "gen-dist-collective-order-3ranks-nodebug",
        "gen-dist-collective-shape-mismatch-nodebug",
        # Ranks 1 and 3 of 4 hang; torchfrtrace reports both missing ("missing ranks: {1, 3}").
        "gen-dist-per-rank-fr-missing-two-ranks",
    ],
)
def test_no_suspect_is_guessed_when_the_log_does_not_tell(case_id: str, shipped_library: Library) -> None:
    d = _diagnose(case_id, shipped_library)
    assert d.initiating is not None and d.initiating.id in ("nccl.watchdog_timeout", "dist.gloo_timeout")
    assert d.hang is None


def test_a_job_whose_first_failure_is_not_a_timeout_names_no_suspect(shipped_library: Library) -> None:
    # A per-rank job whose first failure is an IndexError on one rank: a crash, not a hang.
    d = _diagnose("gen-dist-per-rank-index-error", shipped_library)
    assert d.initiating is not None and d.initiating.id == "data.index_out_of_range"
    assert d.hang is None


def test_the_suspect_does_not_depend_on_the_order_of_the_job_s_files(shipped_library: Library) -> None:
    files = rank_files(load_case(CASES / "gen-dist-hang-rank3-of-4").read())
    assert files is not None and len(files) >= 4
    for order in itertools.permutations(files):
        d = diagnose_many(list(order), shipped_library, threads=1)
        assert d.hang is not None and d.hang.rank == 3, [name for name, _ in order]


def test_the_suspect_is_shown_in_text_markdown_and_json(shipped_library: Library) -> None:
    d = _diagnose("gen-dist-hang-rank3-of-4", shipped_library)
    text = render_text(d)
    assert "SUSPECT RANK: 3 (the rank the others were waiting for" in text
    assert text.index("INITIATING:") < text.index("SUSPECT RANK") < text.index("COLLATERAL")
    assert "### Suspect rank: 3" in render_markdown(d)
    dumped = d.model_dump(mode="json")["hang"]
    assert dumped["rank"] == 3 and [e["rank"] for e in dumped["evidence"]] == [0, 1, 2]
    assert Diagnosis.model_validate_json(d.model_dump_json()) == d


def test_the_waiting_lines_name_patterns_the_library_has(shipped_library: Library) -> None:
    for sig_id, names in WAITING.items():
        sig = shipped_library.signatures[sig_id]
        assert names <= {p.name for p in (*sig.fingerprints, *sig.symptoms)}, sig_id


def test_the_ci_formats_mention_the_suspect_with_the_initiating_failure(shipped_library: Library) -> None:
    d = _diagnose("gen-dist-slow-eval-rank0", shipped_library)
    sarif = render_sarif(d, tool_version="test")
    run = sarif["runs"][0]  # type: ignore[index]
    first = run["results"][0]
    assert first["properties"]["role"] == "initiating" and "Suspect rank: 0" in first["message"]["text"]
    assert not any("Suspect rank" in r["message"]["text"] for r in run["results"][1:])
    assert run["properties"]["hang"]["rank"] == 0
    assert 'name="suspect_rank" value="0"' in render_junit(d)
    assert "Suspect rank: 0" in render_github(d).splitlines()[0]


def test_the_rank_that_stopped_logging_before_the_collective_began_is_the_suspect(shipped_library: Library) -> None:
    # Every rank logs its steps with times; rank 2 blocks at step 8. Ranks 1 and 3 time out
    # (gloo, 15 s) and rank 0 sees its pair closed, so no rule of the waiting lines tells:
    # two ranks never report a timeout. rank2.log ends at step 7, before the collective began.
    d = _diagnose("gen-dist-per-rank-hang-logged", shipped_library)
    assert d.initiating is not None and d.initiating.id == "dist.gloo_timeout"
    assert d.hang is not None and d.hang.rank == 2
    assert d.hang.why.startswith("rank 2's log stops at 2026-12-01 16:41:27.990, 329 ms before the collective")
    assert "ranks 0, 1, 3 logged until at least 2026-12-01 16:41:43" in d.hang.why
    (last,) = d.hang.evidence
    assert (last.file, last.line, last.rank) == ("rank2.log", 8, 2) and "step    7" in last.text
    for order in itertools.permutations(load_case(CASES / "gen-dist-per-rank-hang-logged").logs):
        again = diagnose_many([(p.name, p) for p in order], shipped_library, threads=1)
        assert again.hang == d.hang


def test_a_rank_quiet_from_the_start_is_not_taken_for_the_one_that_stopped(shipped_library: Library) -> None:
    # Only rank 1 of gen-dist-per-rank-hang reports (with no times at all): the rule needs times
    # and when the collective began, so the suspect comes from the waiting lines alone.
    d = _diagnose("gen-dist-per-rank-hang", shipped_library)
    assert d.hang is not None and "stops at" not in d.hang.why


FR_CASE = "gen-dist-per-rank-fr-missing-rank"


def test_the_rank_the_flight_recorder_analysis_finds_missing_is_the_suspect(shipped_library: Library) -> None:
    # Rank 1 of 3 blocks at step 6; ranks 0 and 2 time out in the gradient all_reduce; every rank
    # writes its flight recorder trace and torchfrtrace's analysis of them is fr_trace.log.
    d = _diagnose(FR_CASE, shipped_library)
    assert d.initiating is not None and d.initiating.id == "dist.gloo_timeout"
    assert d.hang is not None and d.hang.rank == 1
    assert d.hang.why.startswith(
        "the flight recorder's analysis (torchfrtrace) reports rank 1 missing from collective sequence number 18"
    )
    header, missing, *waiting = d.hang.evidence
    assert (header.file, header.line, header.text) == (
        "fr_trace.log",
        2,
        "Not all ranks joining collective, sequence number: 18",
    )
    assert (missing.file, missing.line, missing.text) == ("fr_trace.log", 6, "missing ranks: {1}")
    # The waiting ranks' own lines agree (rank 1 never reports the timeout) and are shown after.
    assert [(e.file, e.rank) for e in waiting] == [("rank0.log", 0), ("rank2.log", 2)]
    for order in itertools.permutations(load_case(CASES / FR_CASE).logs):
        again = diagnose_many([(p.name, p) for p in order], shipped_library, threads=1)
        assert again.hang == d.hang, [p.name for p in order]


def test_the_flight_recorder_analysis_alone_names_the_suspect(shipped_library: Library) -> None:
    # With only rank 0's file, no rule of the waiting lines tells: rank 0 is the one rank shown.
    logs = {p.name: p for p in load_case(CASES / FR_CASE).logs}
    alone = diagnose_many([("rank0.log", logs["rank0.log"])], shipped_library, threads=1)
    assert alone.initiating is not None and alone.initiating.id == "dist.gloo_timeout" and alone.hang is None
    d = diagnose_many([(n, logs[n]) for n in ("rank0.log", "fr_trace.log")], shipped_library, threads=1)
    assert d.hang is not None and d.hang.rank == 1
    assert [e.file for e in d.hang.evidence] == ["fr_trace.log", "fr_trace.log"]
    assert "SUSPECT RANK: 1" in render_text(d) and "missing ranks: {1}" in render_text(d)
    # Its lines are the hang's own evidence too (symptoms of the gloo timeout).
    assert [(e.file, e.pattern) for e in d.initiating.evidence if e.kind == "symptom"] == [
        ("fr_trace.log", "fr_not_all_joined"),
        ("fr_trace.log", "fr_missing_ranks"),
    ]


# torchfrtrace's output on a real 8-rank job, pasted in https://github.com/pytorch/pytorch/pull/140969
# (the wording of that time: "collective: sequence number"); five ranks are missing.
PR_140969 = """\
Not all ranks joining collective: sequence number: 31117
internal record id: 31116
group info: 0:default_pg
collective: nccl:all_reduce
missing ranks: {3, 4, 5, 6, 7}
input sizes: [[1571911]]
output sizes: [[1571911]]
world size: 8
expected ranks: {0, 1, 2, 3, 4, 5, 6, 7}
collective state: scheduled
"""
# Its output in PyTorch's flight recorder tutorial (an earlier wording: "collective 5 at entry 4"),
# https://github.com/pytorch/tutorials/blob/main/prototype_source/flight_recorder_tutorial.rst
TUTORIAL = """\
  Not all ranks joining collective 5 at entry 4
  group info: 0:default_pg
  collective: nccl:all_reduce
  missing ranks: {1}
  input sizes: [[3, 4]]
  output sizes: [[3, 4]]
  expected ranks: 2
  collective state: scheduled
"""


@pytest.mark.parametrize("sig_id", sorted(RECORDER))
@pytest.mark.parametrize(
    ("paste", "collective", "missing"), [(PR_140969, "31117", "3, 4, 5, 6, 7"), (TUTORIAL, "5", "1")]
)
def test_the_analysis_lines_of_public_pastes_are_read(
    sig_id: str, paste: str, collective: str, missing: str, shipped_library: Library
) -> None:
    sig = shipped_library.signatures[sig_id]
    patterns = {p.name: regex.compile(p.regex) for p in sig.symptoms}
    lines = paste.splitlines()
    header = [m for line in lines if (m := patterns["fr_not_all_joined"].search(line))]
    named = [m for line in lines if (m := patterns["fr_missing_ranks"].search(line))]
    assert [m["fr_collective"] for m in header] == [collective]
    assert [m["fr_missing_ranks"] for m in named] == [missing]


def test_an_analysis_that_finds_several_ranks_missing_names_none(shipped_library: Library) -> None:
    # Ranks 1 and 3 of 4 hang: the analysis is read (its lines are the timeout's evidence) but
    # names two ranks, and the waiting lines cannot tell which one the others waited for.
    d = _diagnose("gen-dist-per-rank-fr-missing-two-ranks", shipped_library)
    assert d.initiating is not None and d.initiating.id == "dist.gloo_timeout"
    assert [e.text for e in d.initiating.evidence if e.pattern == "fr_missing_ranks"] == ["missing ranks: {1, 3}"]
    assert d.hang is None


def test_the_analysis_in_the_same_console_log_names_the_suspect(shipped_library: Library) -> None:
    # torchrun's merged output, then torchfrtrace's analysis in the same shell: one file.
    d = _diagnose("gen-dist-fr-analysis-in-log", shipped_library)
    assert d.initiating is not None and d.initiating.id == "dist.gloo_timeout"
    assert d.hang is not None and d.hang.rank == 1
    assert d.hang.why.startswith("the flight recorder's analysis (torchfrtrace) reports rank 1 missing")
    header, missing, *waiting = d.hang.evidence
    assert (header.text, missing.text) == (
        "Not all ranks joining collective, sequence number: 18",
        "missing ranks: {1}",
    )
    # The analysis is no rank's output, though the log's only prefixed rank lends 0 to its lines.
    assert header.rank is None and missing.rank is None and header.line < missing.line
    assert [e.rank for e in waiting] == [0] and "Timed out waiting" in waiting[0].text
