"""How the browser tests start Debian's Chromium (driven by PyPI playwright, never `playwright
install`): without the background-networking flags it keeps trying hosts this machine cannot
reach. Screenshots go to `test-artifacts/`."""

from __future__ import annotations

from pathlib import Path

__all__ = ["ARGS", "ARTIFACTS", "CHROMIUM"]

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
