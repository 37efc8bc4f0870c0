"""`rlvitals report --png`: a screenshot through the system Chromium (in its own module, so no
other Playwright session is running in this thread)."""

from __future__ import annotations

from pathlib import Path

import pytest
from installed import installed

from rlvitals.cli import main

installed("playwright.sync_api", "playwright")


def test_png_option_uses_the_system_chromium(
    report_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not Path("/usr/bin/chromium").exists():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    monkeypatch.delenv("RLVITALS_INFLUX_URL", raising=False)
    out, png = tmp_path / "h.html", tmp_path / "h.png"
    args = ["report", "--run", "r-healthy", "--store", str(report_store), "--out", str(out)]
    assert main([*args, "--png", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000
