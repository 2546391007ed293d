"""Promises the documentation makes: the references are the code's own, every setting and command
is in them, the README fits on a page and its links lead somewhere, the tier table is the server's."""

from __future__ import annotations

import re
from pathlib import Path

import click

from app.cli import main
from app.cli.reference import references
from app.config import Settings
from app.quota.tiers import tier_table
from app.web.upload import human_bytes

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
SERVICE = (ROOT / "docs" / "service.md").read_text()


def test_the_generated_references_are_current() -> None:
    stale = [str(p.relative_to(ROOT)) for p, text in references().items() if p.read_text(encoding="utf-8") != text]
    assert stale == [], "run `python -m app.cli.reference` and commit the result"


def test_every_setting_is_in_the_settings_reference() -> None:
    text = (ROOT / "docs" / "reference" / "settings.md").read_text()
    missing = [name for name in Settings.model_fields if f"| `TRACELORE_{name.upper()}` |" not in text]
    assert missing == []


def _commands(group: click.Group, prefix: str) -> list[str]:
    out = []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            out += _commands(command, f"{prefix} {name}")
        else:
            out.append(f"{prefix} {name}")
    return out


def test_every_command_is_in_the_command_reference() -> None:
    text = (ROOT / "docs" / "reference" / "cli.md").read_text()
    missing = [c for c in _commands(main, "tracelore") if f"### {c}\n" not in text]
    assert missing == []


def test_the_readme_fits_on_a_page_and_its_links_lead_somewhere() -> None:
    assert len(README.splitlines()) <= 150
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), target


def test_the_tier_table_shows_the_numbers_the_server_uses() -> None:
    """One source for the numbers: the documented table is the defaults' effective tier table."""
    for tier in tier_table(Settings()).values():
        row = f"| `{tier.name}` |"
        line = next((line for line in SERVICE.splitlines() if line.startswith(row)), None)
        assert line is not None, f"no row for the {tier.name} tier in docs/service.md"
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[2:] == [str(tier.daily), human_bytes(tier.max_log_bytes)], line


def test_every_option_of_every_command_has_help() -> None:
    def walk(group: click.Group, prefix: str) -> list[tuple[str, click.Command]]:
        ctx = click.Context(group)
        out: list[tuple[str, click.Command]] = []
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            assert command is not None
            out += (
                walk(command, f"{prefix} {name}")
                if isinstance(command, click.Group)
                else [(f"{prefix} {name}", command)]
            )
        return out

    bare = [
        (name, p.opts[0])
        for name, command in walk(main, "tracelore")
        for p in command.params
        if isinstance(p, click.Option) and not p.help
    ]
    assert bare == []
