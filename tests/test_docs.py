"""Promises the README makes: every setting and every command is documented."""

from __future__ import annotations

from pathlib import Path

import click

from app.cli import main
from app.config import Settings
from app.quota.tiers import tier_table
from app.web.upload import human_bytes

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


def test_the_tier_table_shows_the_numbers_the_server_uses() -> None:
    """One source for the numbers: the README's table is the defaults' effective tier table."""
    for tier in tier_table(Settings()).values():
        row = f"| `{tier.name}` |"
        line = next((line for line in README.splitlines() if line.startswith(row)), None)
        assert line is not None, f"no README row for the {tier.name} tier"
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[2:] == [str(tier.daily), human_bytes(tier.max_log_bytes)], line
