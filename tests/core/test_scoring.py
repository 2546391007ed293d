"""The figures of `tracelore eval`, counted from outcomes."""

from __future__ import annotations

import dataclasses

from app.core.knowledge.scoring import NOTHING, Outcome, score
from app.core.knowledge.sights import Sight


def outcome(
    case: str,
    expected: str,
    ranked: tuple[str, ...],
    *,
    collateral: tuple[str, ...] = (),
    likely: tuple[str, ...] | None = None,
    also_ok: tuple[str, ...] = (),
) -> Outcome:
    return Outcome(
        case=case,
        expected=expected,
        accepted=frozenset((expected, *also_ok)),
        collateral=collateral,
        ranked=ranked,
        likely=frozenset(ranked if likely is None else likely),
    )


LAYERS = {"cuda.oom": "memory", "nccl.watchdog_timeout": "distributed", "host.oom_killed": "memory"}


def test_collateral_order_needs_the_cause_above_every_echo() -> None:
    echo = ("nccl.watchdog_timeout",)
    above = outcome("a", "cuda.oom", ("cuda.oom", "nccl.watchdog_timeout"), collateral=echo)
    below = outcome("b", "cuda.oom", ("nccl.watchdog_timeout", "cuda.oom"), collateral=echo)
    missing = outcome("c", "cuda.oom", ("nccl.watchdog_timeout",), collateral=echo)
    unlisted_echo = outcome("d", "cuda.oom", ("cuda.oom",), collateral=echo)
    assert [o.collateral_ordered for o in (above, below, missing, unlisted_echo)] == [True, False, False, True]
    report = score([above, below, missing, unlisted_echo], layer_of=LAYERS, known=LAYERS)
    assert (report.collateral_order.hits, report.collateral_order.total) == (2, 4)
    assert (report.top1.hits, report.top3.hits) == (2, 3)


def test_also_ok_counts_as_right_and_healthy_runs_count_only_likely_alarms() -> None:
    alt = outcome("a", "host.oom_killed", ("cuda.oom",), also_ok=("cuda.oom",))
    quiet = outcome("h1", "none", ("cuda.oom",), likely=())
    alarm = outcome("h2", "none", ("cuda.oom",))
    nothing = outcome("n", "cuda.oom", ())
    report = score([alt, quiet, alarm, nothing], layer_of=LAYERS, known=LAYERS)
    assert (report.top1.hits, report.top1.total) == (1, 2)
    assert (report.healthy_clean.hits, report.healthy_clean.total) == (1, 2)
    assert report.signatures["cuda.oom"].false_alarms == 1 and report.signatures["cuda.oom"].healthy == 2
    assert ("cuda.oom", NOTHING, 1) in report.confusions
    assert report.layers["memory"][0].total == 2


def test_a_class_with_no_signature_is_counted_apart_not_as_a_miss() -> None:
    """Such a log measures the library's breadth: no ranking could get it right."""
    report = score([outcome("a", "ray.worker_died", ()), outcome("b", "cuda.oom", ())], layer_of=LAYERS, known=LAYERS)
    assert report.unknown_classes == {"ray.worker_died": 1}
    assert (report.top1.hits, report.top1.total, report.failures) == (0, 1, 1)
    assert report.below({"top1": 0.5}) == ["top1 0.000 is below the threshold 0.500"]
    assert report.below({"healthy_clean": 1.0}) == []  # no healthy case: nothing to hold it to


def seen(
    o: Outcome,
    ranked: tuple[str, ...],
    *,
    known: bool = True,
    added: str = "2026-12-04",
    batch: str | None = None,
    ecosystem: str | None = None,
) -> Outcome:
    sight = Sight(ranked=ranked, known=known, added=added, batch=batch, ecosystem=ecosystem)
    return dataclasses.replace(o, first=sight)


def test_first_sight_is_judged_on_what_the_library_said_then_next_to_now() -> None:
    wrong_then = seen(outcome("a", "cuda.oom", ("cuda.oom",)), ("host.oom_killed",), batch="b1")
    nothing_then = seen(outcome("b", "cuda.oom", ("cuda.oom",)), (), batch="b1")
    third_then = seen(
        outcome("c", "cuda.oom", ()), ("host.oom_killed", "nccl.watchdog_timeout", "cuda.oom"), batch="b2"
    )
    right_then = seen(outcome("d", "host.oom_killed", ("host.oom_killed",)), ("host.oom_killed",), added="2027-01-02")
    new_class = seen(outcome("e", "ray.worker_died", ()), (), known=False, batch="b2")
    healthy = seen(outcome("h", "none", ()), ())
    unseen = outcome("f", "cuda.oom", ())  # added before first sight was kept: not in these figures
    report = score(
        [wrong_then, nothing_then, third_then, right_then, new_class, healthy, unseen], layer_of=LAYERS, known=LAYERS
    )
    groups = {g.label: g for g in report.first_sight}
    assert list(groups) == ["all", "batch b1", "batch b2", "added 2026-12", "added 2027-01"]
    every = groups["all"]
    assert (every.cases, every.known, str(every.coverage)) == (5, 4, "0.800 (4/5)")
    assert (every.then_top1.hits, every.then_top3.hits, every.then_none.hits, every.then_top1.total) == (1, 2, 1, 4)
    assert (every.now_top1.hits, every.now_top3.hits, every.now_none.hits) == (3, 3, 1)
    assert (groups["batch b2"].cases, groups["batch b2"].known, groups["batch b2"].then_top3.hits) == (2, 1, 1)
    assert (groups["added 2027-01"].then_top1.hits, groups["added 2027-01"].then_top1.total) == (1, 1)


def test_coverage_of_the_sampled_failures_is_counted_per_ecosystem_then_and_now() -> None:
    """A class without a signature when sampled counts against coverage then; a signature since counts now."""
    jax_known = seen(outcome("a", "cuda.oom", ("cuda.oom",)), ("cuda.oom",), ecosystem="JAX")
    jax_new = seen(outcome("b", "host.oom_killed", ("host.oom_killed",)), (), known=False, ecosystem="JAX")
    ray_new = seen(outcome("c", "ray.worker_died", ()), (), known=False, ecosystem="Ray")
    no_ecosystem = seen(outcome("d", "cuda.oom", ("cuda.oom",)), ("cuda.oom",))
    report = score([jax_known, jax_new, ray_new, no_ecosystem], layer_of=LAYERS, known=LAYERS)
    by = {g.label: g for g in report.coverage}
    assert list(by) == ["JAX", "Ray"]
    assert (str(by["JAX"].coverage), str(by["JAX"].coverage_now)) == ("0.500 (1/2)", "1.000 (2/2)")
    assert (str(by["Ray"].coverage), str(by["Ray"].coverage_now)) == ("0.000 (0/1)", "0.000 (0/1)")
    every = report.first_sight[0]
    assert (every.known, every.known_now, every.cases) == (2, 3, 4)


def test_no_first_sight_no_figures() -> None:
    assert score([outcome("a", "cuda.oom", ("cuda.oom",))], layer_of=LAYERS, known=LAYERS).first_sight == ()


def test_order_independent_counts_only_multi_rank_cases() -> None:
    one_rank = outcome("a", "cuda.oom", ("cuda.oom",))
    stable = Outcome(**{**one_rank.__dict__, "case": "b", "order_stable": True})
    unstable = Outcome(**{**one_rank.__dict__, "case": "c", "order_stable": False})
    report = score([one_rank, stable, unstable], layer_of=LAYERS, known=LAYERS)
    assert (report.order_independent.hits, report.order_independent.total) == (1, 2)
    assert report.below({"order_independent": 1.0}) == ["order_independent 0.500 is below the threshold 1.000"]


def test_rank_right_counts_failures_whose_label_names_a_rank() -> None:
    unlabelled = outcome("a", "cuda.oom", ("cuda.oom",))
    on_rank = Outcome(**{**unlabelled.__dict__, "case": "b", "expected_rank": 1, "rank": 1})
    other_rank = Outcome(**{**unlabelled.__dict__, "case": "c", "expected_rank": 1, "rank": 0})
    wrong_class = Outcome(
        **{**unlabelled.__dict__, "case": "d", "ranked": ("host.oom_killed",), "expected_rank": 1, "rank": 1}
    )
    report = score([unlabelled, on_rank, other_rank, wrong_class], layer_of=LAYERS, known=LAYERS)
    assert (report.rank_right.hits, report.rank_right.total) == (1, 3)
    assert report.below({"rank_right": 0.95}) == ["rank_right 0.333 is below the threshold 0.950"]
    assert [o.case for o in report.rank_misses()] == ["c", "d"]


def test_thresholds_hold_the_established_and_the_sampled_cases_apart() -> None:
    """Cases the fingerprints were written from and cases sampled with their first sight are two populations."""
    established = [outcome("a", "cuda.oom", ("cuda.oom",)), outcome("b", "cuda.oom", ("cuda.oom",))]
    sampled = [seen(outcome("c", "cuda.oom", ()), ()), seen(outcome("d", "cuda.oom", ("cuda.oom",)), ())]
    report = score([*established, *sampled], layer_of=LAYERS, known=LAYERS)
    assert (report.top1.hits, report.top1.total) == (3, 4)
    assert report.figure("top1") == 1.0 and report.figure("sampled.top1") == 0.5
    assert report.below({"top1": 0.99, "sampled.top1": 0.6}) == ["sampled.top1 0.500 is below the threshold 0.600"]
    alone = score(sampled, layer_of=LAYERS, known=LAYERS)
    assert list(alone.parts) == ["sampled"] and alone.figure("sampled.top1") == 0.5 and alone.figure("top1") is None


def test_trust_figures_count_echoes_and_first_sight() -> None:
    then = Sight(ranked=("host.oom_killed",), known=True, added="2026-12-05", batch="t")
    right_then = Sight(ranked=("cuda.oom",), known=True, added="2026-12-05", batch="t")
    items = [
        outcome("a", "cuda.oom", ("cuda.oom", "nccl.watchdog_timeout"), collateral=("nccl.watchdog_timeout",)),
        dataclasses.replace(outcome("b", "cuda.oom", ("cuda.oom",)), first=then),
        dataclasses.replace(outcome("c", "cuda.oom", ("cuda.oom",)), first=right_then),
    ]
    report = score(items, layer_of=LAYERS, known=LAYERS)
    oom, watchdog = report.signatures["cuda.oom"], report.signatures["nccl.watchdog_timeout"]
    assert (oom.first_sight_cases, oom.first_sight_right) == (2, 1)
    assert oom.short() == (
        "recognised 3 of 3 real logs, named wrongly in 0; at first sight (logs it had never seen), right in 1 of 2"
    )
    assert "named first in 1 of 2 before any fingerprint changed" in oom.sentence()
    # Known only as an echo: said so, not "no real log yet".
    assert watchdog.cases == 0 and watchdog.echo_cases == 1
    assert watchdog.short() == "seen only as an echo of other failures, in 1 real log"
    assert watchdog.sentence().startswith("Known as an echo: in 1 real log it follows another failure")
