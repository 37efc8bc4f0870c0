"""A PNG of a written report, through Playwright driving the system's Chromium (never a browser
Playwright downloads). Playwright is imported only here, and only when a PNG is asked for."""

from __future__ import annotations

from pathlib import Path

__all__ = ["CHROMIUM_ARGS", "DEFAULT_CHROMIUM", "PngError", "screenshot"]

DEFAULT_CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


class PngError(RuntimeError):
    """The screenshot could not be taken; the message says what to install or set."""


def screenshot(
    html: Path, png: Path, *, chromium: str = DEFAULT_CHROMIUM, width: int = 1280
) -> Path:
    """Open `html` from disk (every other request is refused) and save a full-page PNG."""
    try:
        from playwright.sync_api import Route, sync_playwright
    except ImportError as exc:
        raise PngError(
            "--png needs the `playwright` package (pip install playwright; do not run "
            "`playwright install`: the system Chromium is used)"
        ) from exc
    if not Path(chromium).exists():
        raise PngError(f"no Chromium at {chromium}; install Debian's `chromium` or pass --chromium")

    def refuse_remote(route: Route) -> None:
        if route.request.url.startswith(("file:", "data:")):
            route.continue_()
        else:
            route.abort()

    png.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=list(CHROMIUM_ARGS))
        try:
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.route("**/*", refuse_remote)
            page.goto(html.resolve().as_uri())
            page.screenshot(path=str(png), full_page=True)
        finally:
            browser.close()
    return png
