"""The figures of `tracelore eval`, counted from outcomes."""

from __future__ import annotations

from app.core.knowledge.scoring import NOTHING, Outcome, score


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


def test_unknown_classes_and_thresholds() -> None:
    report = score([outcome("a", "ray.worker_died", ())], layer_of=LAYERS, known=LAYERS)
    assert report.unknown_classes == {"ray.worker_died": 1}
    assert report.below({"top1": 0.5}) == ["top1 0.000 is below the threshold 0.500"]
    assert report.below({"healthy_clean": 1.0}) == []  # no healthy case: nothing to hold it to


def test_order_independent_counts_only_multi_rank_cases() -> None:
    one_rank = outcome("a", "cuda.oom", ("cuda.oom",))
    stable = Outcome(**{**one_rank.__dict__, "case": "b", "order_stable": True})
    unstable = Outcome(**{**one_rank.__dict__, "case": "c", "order_stable": False})
    report = score([one_rank, stable, unstable], layer_of=LAYERS, known=LAYERS)
    assert (report.order_independent.hits, report.order_independent.total) == (1, 2)
    assert report.below({"order_independent": 1.0}) == ["order_independent 0.500 is below the threshold 1.000"]
