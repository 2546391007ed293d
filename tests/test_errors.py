"""The error tree's one helper: a caught error is never edited, a changed copy is raised instead."""

from __future__ import annotations

from pathlib import Path

from app.errors import Issue, LibraryError, MailLimit, SignInFirst, TooLarge, TraceloreError


def test_amended_is_a_new_error_of_the_same_class_and_the_caught_one_is_unchanged() -> None:
    caught = TooLarge("the log is over 10 MB", headers={"X-A": "1"}, extra={"limit": 10})
    amended = caught.amended(detail="the log is over 10 MB. Not counted.", headers={"X-B": "2"}, extra={"c": False})
    assert type(amended) is TooLarge and amended is not caught
    assert (amended.detail, str(amended), amended.headers, amended.extra) == (
        "the log is over 10 MB. Not counted.",
        "the log is over 10 MB. Not counted.",
        {"X-B": "2"},
        {"c": False},
    )
    assert (caught.detail, str(caught), caught.headers, caught.extra) == (
        "the log is over 10 MB",
        "the log is over 10 MB",
        {"X-A": "1"},
        {"limit": 10},
    )


def test_amended_keeps_what_a_subclass_made_in_its_own_init() -> None:
    limit = MailLimit("too many links", status=503, retry_after=60)
    amended = limit.amended(detail="too many links, again")
    assert (amended.status, amended.retry_after, amended.headers, amended.extra) == (503, 60, {}, {})
    assert SignInFirst().amended(detail="sign in").title == "Sign in first"
    issues = [Issue(Path("a.yaml"), 3, "bad")]
    assert LibraryError(issues).amended(detail="broken").issues == issues


def test_amended_keeps_where_the_error_was_raised() -> None:
    try:
        raise TraceloreError("failed")
    except TraceloreError as exc:
        assert exc.amended(detail="failed, said again").__traceback__ is exc.__traceback__
