"""A Chromium page for the live dashboard's browser tests: it records console errors, uncaught
exceptions and requests to any other host, and `close()` fails the test on any of them; and
`serving`, the real app on an embedded store over HTTP."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from chromium import ARTIFACTS
from werkzeug.serving import make_server

import registry
from grafana.datasource.app import create_app
from grafana.datasource.config import DatasourceConfig

__all__ = ["Page", "serving"]


class Page:
    """A page that records console errors, uncaught exceptions and requests to other hosts."""

    def __init__(self, browser: Any, base_url: str) -> None:
        self.base = base_url
        self.context = browser.new_context(
            viewport={"width": 1400, "height": 1000}, accept_downloads=True
        )
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.outside: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

        def gate(route: Any) -> None:
            if route.request.url.startswith((base_url, "data:")):
                route.continue_()
            else:
                self.outside.append(route.request.url)
                route.abort()

        self.page.route("**/*", gate)

    def open_run(self, query: str) -> Any:
        self.page.goto(f"{self.base}/run?{query}")
        self.page.wait_for_selector("body[data-ready='1']", timeout=30_000)
        assert self.page.locator("#error").is_hidden(), self.page.locator("#error").inner_text()
        return self.page

    def chart(self, field: str, expr: str) -> Any:
        return self.page.evaluate(
            f"(() => {{ const u = rlvitalsDash.charts.get({field!r}); return {expr}; }})()"
        )

    def shot(self, name: str) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / name
        self.page.screenshot(path=str(path), full_page=False)
        assert path.stat().st_size > 10_000
        return path

    def close(self) -> None:
        self.context.close()
        assert self.errors == [], self.errors
        assert self.outside == [], self.outside


@contextmanager
def serving(
    store: Path, reg: registry.Registry, *, allow_edit: bool | None = None
) -> Iterator[str]:
    """The real datasource app (what `rlvitals serve` runs) on the embedded store at `store`,
    over HTTP on a free port; yields its base URL. `allow_edit`: runs may be changed from the
    pages (what `serve` bound to 127.0.0.1 sets)."""
    app = create_app(DatasourceConfig(store=store, allow_edit=allow_edit), reg)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(5)
