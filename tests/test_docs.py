"""Promises the README makes: every setting and every command is documented."""

from __future__ import annotations

from pathlib import Path

import click

from app.cli import main
from app.config import Settings

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_every_setting_is_in_the_readme() -> None:
    missing = [name for name in Settings.model_fields if f"`TRACELORE_{name.upper()}`" not in README]
    assert missing == []


def _commands(group: click.Group, prefix: str) -> list[str]:
    out = []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            out += _commands(command, f"{prefix} {name}")
        else:
            out.append(f"{prefix} {name}")
    return out


def test_every_command_is_in_the_readme() -> None:
    missing = [c for c in _commands(main, "tracelore") if f"`{c}" not in README]
    assert missing == []
