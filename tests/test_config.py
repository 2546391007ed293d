"""The settings object reads TRACELORE_* variables; arguments win over them."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from app.config import Settings


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
