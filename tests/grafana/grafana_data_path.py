"""Drive tests/grafana/node/data_path.cjs: Grafana's own @grafana/data code run with Node.

`npm ci` in tests/grafana/node installs the pinned @grafana/data from the lock file: .ci/run does
it, and so does the first test that needs it in a fresh clone (so the README's set-up line 2
works as it stands). A test that needs it is skipped, with the reason, only when `node` is not
on PATH; when the install fails, it fails naming the command.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

__all__ = ["NODE_DIR", "require_node", "run_panels"]

NODE_DIR = Path(__file__).parent / "node"
INSTALLED = ("@grafana/data", "@grafana/ui", "react-dom", ".bin/esbuild")
"""What package.json installs: when one is missing (an older install), `npm ci` runs again."""


def require_node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH: Grafana's @grafana/data cannot run (install Node 20)")
    if not all((NODE_DIR / "node_modules" / pkg).exists() for pkg in INSTALLED):
        _npm_ci()
    return node


def _npm_ci() -> None:
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail(
            f"@grafana/data is not installed and npm is missing: run `npm ci` in {NODE_DIR}"
        )
    done = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--silent"],
        cwd=NODE_DIR,
        capture_output=True,
        timeout=900,
    )
    if done.returncode != 0 or not (NODE_DIR / "node_modules" / "@grafana" / "data").is_dir():
        pytest.fail(
            f"`npm ci` in {NODE_DIR} failed ({done.returncode}): "
            f"{done.stderr.decode(errors='replace')[-2000:]}"
        )


def run_panels(panels: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each panel's frames after its transformations and field config, as Grafana computes them."""
    node = require_node()
    proc = subprocess.run(
        [node, str(NODE_DIR / "data_path.cjs")],
        input=json.dumps({"panels": list(panels)}).encode(),
        capture_output=True,
        cwd=NODE_DIR,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    out: list[dict[str, Any]] = json.loads(proc.stdout)["panels"]
    return out
