"""The settings object reads TRACELORE_* variables; arguments win over them."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from app.config import Settings, Threads, thread_policy, usable_cores
from app.web.state import state_of


def test_variables_are_read_and_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACELORE_PORT", "9123")
    monkeypatch.setenv("TRACELORE_STORE_LOG", "true")
    monkeypatch.setenv("TRACELORE_DATA_DIR", "/srv/tracelore")
    monkeypatch.setenv("TRACELORE_DATABASE_URL", "postgres://db/tracelore")
    monkeypatch.setenv("TRACELORE_NOT_A_SETTING", "ignored")
    settings = Settings()
    assert settings.port == 9123 and settings.store_log is True
    assert settings.data_dir == Path("/srv/tracelore")
    assert settings.database_url == "postgresql+psycopg://db/tracelore"


def test_arguments_win_over_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACELORE_PORT", "9123")
    assert Settings(port=8001).port == 8001


def test_a_bad_value_is_refused_with_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACELORE_WORKERS", "many")
    with pytest.raises(ValidationError, match="workers"):
        Settings()


def test_cache_dir_defaults_to_the_user_cache_and_empty_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACELORE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/var/cache/someone")
    assert Settings().cache_dir == Path("/var/cache/someone/tracelore")
    monkeypatch.setenv("TRACELORE_CACHE_DIR", "")
    assert Settings().cache_dir is None


def test_previous_secret_keys_are_a_comma_list_newest_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACELORE_PREVIOUS_SECRET_KEYS", " key-2025 ,key-2024,, ")
    assert Settings().previous_secret_keys == ("key-2025", "key-2024")
    monkeypatch.setenv("TRACELORE_PREVIOUS_SECRET_KEYS", "")
    assert Settings().previous_secret_keys == ()


def test_one_thread_policy_names_diagnoses_apart_from_scan_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    cores = usable_cores()
    # The CLI runs one diagnosis: it scans with a thread per core (two to eight).
    assert thread_policy(Settings(), diagnoses=1) == Threads(diagnoses=1, scan=min(8, max(2, cores)))
    # The service runs one diagnosis per core (never more than it admits); each scans with its share.
    served = thread_policy(Settings(max_in_flight=64))
    assert served.diagnoses == min(64, cores) and served.scan == min(8, max(2, cores // served.diagnoses))
    assert thread_policy(Settings(max_in_flight=1)).diagnoses == 1
    monkeypatch.setenv("TRACELORE_DIAGNOSIS_THREADS", "3")
    monkeypatch.setenv("TRACELORE_SCAN_THREADS", "5")
    assert thread_policy(Settings()) == Threads(diagnoses=3, scan=5)
    assert thread_policy(Settings(), diagnoses=1) == Threads(diagnoses=1, scan=5)


def test_the_service_takes_its_threads_from_the_policy(tmp_path: Path) -> None:
    from app.web.app import create_app

    settings = Settings(data_dir=tmp_path, cache_dir=None, diagnosis_threads=2, scan_threads=3, max_in_flight=4)
    app = create_app(settings)
    try:
        assert state_of(app).threads == Threads(diagnoses=2, scan=3)
        assert state_of(app).gate.threads == 2
    finally:
        state_of(app).engine.dispose()
