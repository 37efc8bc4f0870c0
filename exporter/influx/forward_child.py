"""Entry point of the forwarder's child process: `python -m exporter.influx.forward_child`.

Its own module, imported by nothing, so running it does not import a module the package has
already imported (runpy warns about that on the child's stderr, the training's terminal).
"""

from __future__ import annotations

import sys

from .forward_process import main

if __name__ == "__main__":
    sys.exit(main())
