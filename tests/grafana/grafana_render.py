"""Build the rendering harness (tests/grafana/node/render/harness.jsx): Grafana's @grafana/ui and
@grafana/data, pinned to the compose image's 13.2.0, bundled by the pinned esbuild into one script
a test page loads in Chromium (see test_dashboards_drawn_browser.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from grafana_data_path import NODE_DIR, require_node

__all__ = ["build_harness"]

ENTRY = NODE_DIR / "render" / "harness.jsx"


def build_harness(out_dir: Path) -> Path:
    """The harness bundled into `out_dir/harness.js` (about 2.3 MB, about 2 s)."""
    require_node()
    out = out_dir / "harness.js"
    done = subprocess.run(
        [
            str(NODE_DIR / "node_modules" / ".bin" / "esbuild"),
            str(ENTRY.relative_to(NODE_DIR)),
            "--bundle",
            "--format=iife",
            "--jsx=automatic",
            "--minify",
            "--log-level=error",
            '--define:process.env.NODE_ENV="production"',
            # stylesheets as text (the harness inserts uPlot's; the editors' ones are unused and
            # dropped), fonts and icons empty: nothing drawn here uses them
            "--loader:.css=text",
            *(f"--loader:.{ext}=empty" for ext in ("ttf", "svg", "woff", "woff2")),
            f"--outfile={out}",
        ],
        cwd=NODE_DIR,
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0 and out.is_file(), (
        f"esbuild could not bundle {ENTRY}: {done.stderr.decode(errors='replace')[-3000:]}"
    )
    return out
