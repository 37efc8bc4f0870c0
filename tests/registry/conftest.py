from __future__ import annotations

import pytest

import registry


@pytest.fixture(scope="session")
def builtin() -> registry.Registry:
    """The shipped registry."""
    return registry.load()
