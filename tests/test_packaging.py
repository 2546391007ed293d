"""A wheel (what `pip install tracelore` gets) carries the signatures, templates, static files and migrations."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHECK = """
from pathlib import Path
import app, sys
from app.config import Settings
from app.core import load_library
from app.store.migrate import MIGRATIONS
from app.web.templating import TEMPLATES
from app.web.app import STATIC
settings = Settings()
assert not Path(app.__file__).is_relative_to({repo!r}), app.__file__
assert settings.signatures_dir.is_relative_to(sys.prefix), settings.signatures_dir
print(len(load_library(settings.signatures_dir)), (TEMPLATES / "base.html").is_file(),
      (MIGRATIONS / "versions").is_dir(), (STATIC / "tracelore.css").is_file())
"""


def test_an_installed_wheel_finds_everything_it_reads(tmp_path: Path) -> None:
    before = (Path(sys.executable).parent / "tracelore").exists()
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(REPO)],
        check=True,
        capture_output=True,
    )
    env_dir = tmp_path / "env"
    # The new environment's own pip: `pip install --prefix` from this one would uninstall
    # this environment's tracelore first.
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # Dependencies come from this environment; the package itself only from the wheel.
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (wheel,) = (tmp_path / "dist").glob("tracelore-*.whl")
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )
    out = subprocess.run(
        [python, "-c", CHECK.format(repo=str(REPO))], cwd=tmp_path, check=True, capture_output=True, text=True
    )
    count, templates, migrations, static = out.stdout.split()
    assert int(count) >= 88 and (templates, migrations, static) == ("True", "True", "True")
    assert (Path(sys.executable).parent / "tracelore").exists() == before  # this environment untouched
