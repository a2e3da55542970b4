"""Headless Chromium for the report tests: a page rendered, its images counted once decoded,
and a screenshot taken."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
# Appended to a copy of the page: the title says how many images decoded, and of how many.
IMAGE_CHECK = (
    "<script>window.addEventListener('load', () => { const i = [...document.images];"
    " document.title = 'decoded ' + i.filter(x => x.complete && x.naturalWidth > 0).length"
    " + ' of ' + i.length + ', svg ' + document.querySelectorAll('svg').length; });</script>"
)


def render_in_chromium(page: str, folder: Path, height_px: int) -> tuple[str, Path]:
    """``page`` rendered by headless Chromium: the DOM after the images decoded (its title
    counts them) and a screenshot ``height_px`` tall."""
    checked = folder / "checked.html"
    checked.write_text(page.replace("</body>", IMAGE_CHECK + "</body>"), encoding="utf-8")
    command = [
        str(CHROMIUM),
        *CHROMIUM_FLAGS,
        f"--user-data-dir={folder / 'profile'}",
        "--virtual-time-budget=10000",
        "--dump-dom",
        checked.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    shot = folder / "shot.png"
    command[-2:] = [f"--window-size=1200,{height_px}", f"--screenshot={shot}", checked.as_uri()]
    subprocess.run(command, capture_output=True, timeout=120, check=True)
    return done.stdout, shot


needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)",
)
