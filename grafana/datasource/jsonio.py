"""JSON in and out: strict request bodies, and responses without NaN (which JSON cannot hold)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from flask import request
from flask.json.provider import DefaultJSONProvider

from .errors import BadRequest

__all__ = ["SafeJSONProvider", "finite", "json_body", "sanitize"]


def finite(value: float | None) -> float | None:
    """A float JSON can carry: NaN and infinities become null."""
    if value is None:
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def sanitize(obj: Any) -> Any:
    """The same structure with every non-finite float replaced by None."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): sanitize(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [sanitize(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return sanitize(obj.item())
    return obj


class SafeJSONProvider(DefaultJSONProvider):
    ensure_ascii = False
    sort_keys = False

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        kwargs.setdefault("ensure_ascii", self.ensure_ascii)
        kwargs.setdefault("sort_keys", self.sort_keys)
        kwargs["allow_nan"] = False
        return json.dumps(sanitize(obj), default=self.default, **kwargs)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def json_body(*, empty_ok: bool = True) -> dict[str, Any]:
    """The request body as a JSON object; 400 naming the problem when it is not one."""
    raw = request.get_data(cache=True)
    if not raw.strip():
        if empty_ok:
            return {}
        raise BadRequest("request body is empty; send a JSON object")
    try:
        text = raw.decode("utf-8")
        body = json.loads(text, parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BadRequest(f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest(f"request body must be a JSON object, not {type(body).__name__}")
    return body
