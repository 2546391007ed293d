"""The service's background jobs outlive their failures: a job that raises is logged and runs
again, so the app's lifespan (and with it the store and the other jobs) goes on."""

from __future__ import annotations

import logging

import anyio
import pytest

from app.web.periodic import cron_every, repeat


def _run(first: bool, failures: int, rounds: int) -> tuple[list[str], list[float]]:
    """Run `repeat` until it has slept `rounds` times; what the work did and the sleeps asked for."""
    done: list[str] = []
    slept: list[float] = []

    def work() -> None:
        if len(done) < failures:
            done.append("failed")
            raise RuntimeError("the database went away")
        done.append("ok")

    async def main() -> None:
        async with anyio.create_task_group() as tasks:

            async def sleep(seconds: float) -> None:
                slept.append(seconds)
                if len(slept) == rounds:
                    tasks.cancel_scope.cancel()
                await anyio.sleep(0)

            tasks.start_soon(lambda: repeat(work, every=5, what="the nightly job", first=first, sleep=sleep))

    anyio.run(main)
    return done, slept


def test_a_job_that_fails_is_logged_and_runs_again(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="tracelore"):
        done, slept = _run(first=True, failures=2, rounds=3)
    assert done == ["failed", "failed", "ok"] and slept == [5, 5, 5]
    failed = [r for r in caplog.records if r.getMessage() == "the nightly job failed; it runs again in 5 s"]
    assert len(failed) == 2 and all(r.exc_info and "the database went away" in str(r.exc_info[1]) for r in failed)


def test_a_job_that_waits_first_runs_after_its_first_sleep() -> None:
    done, slept = _run(first=False, failures=0, rounds=2)
    assert done == ["ok"] and slept == [5, 5]


@pytest.mark.parametrize(
    ("seconds", "cron"),
    [
        (10, "* * * * * */10"),
        (60, "*/1 * * * *"),
        (600, "*/10 * * * *"),
        (3600, "0 */1 * * *"),
        (5000, "0 */1 * * *"),  # 83 min divides no hour: the nearest period that does
        (86400, "0 */24 * * *"),
    ],
)
def test_a_period_in_seconds_is_a_cron_line_that_divides_a_minute_an_hour_or_a_day(seconds: int, cron: str) -> None:
    assert cron_every(seconds) == cron
