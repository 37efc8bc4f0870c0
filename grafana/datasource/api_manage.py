"""Run management over HTTP, for the live dashboard: delete, rename, notes and tags.

- `DELETE /api/run` `{"run": R}`: every row of R gone (`exporter.store.run_admin.delete_run`).
- `POST /api/run/rename` `{"run": R, "to": NEW}`.
- `POST /api/run/notes` `{"run": R, "notes": TEXT}` (empty text clears them).
- `POST /api/run/tags` `{"run": R, "add": [TAG...], "remove": [TAG...]}`; answers the tags now.

Each answers `{"ok": true, ...}`, or `{"error": message}` with 400 (bad input), 403 (editing is
off, or a request from another site), 404 (unknown run, close names suggested), 409 (a live
process writes the run, or the new name is taken) or 503 (the store is busy or unwritable).

Who may edit. The same checks as every route first (Host allowlist, the bearer token when one is
set, a JSON Content-Type: a cross-site page cannot send one without a CORS preflight, which this
server never grants). Then here: editing must be on (`DatasourceConfig.allow_edit`: `rlvitals
serve` turns it on when bound to loopback, see `grafana.commands`), and a browser's request must
come from this server's own pages: `Sec-Fetch-Site` (sent by current browsers) must be
`same-origin`, and an `Origin` header must name this server's scheme and Host. A client that is
no browser sends neither (curl, scripts: the token is their check).

With InfluxDB configured the datasource reads history from it and its points are not this
module's to change: editing answers 403 and says to use `rlvitals runs` where the store is.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify, request

from exporter.errors import OutboxError
from exporter.store import run_admin
from exporter.store.outbox import Outbox

from .errors import ApiError, BadRequest, Forbidden, NotFound
from .jsonio import json_body
from .services import services

__all__ = ["blueprint"]

blueprint = Blueprint("api_manage", __name__)


class _Conflict(ApiError):
    status = 409


class _Busy(ApiError):
    status = 503


@blueprint.before_request
def _may_edit() -> None:
    config = services().config
    if config.uses_influx:
        raise Forbidden(
            "run management is off on a datasource that reads InfluxDB; use `rlvitals runs "
            "delete|note|tag` with RLVITALS_INFLUX_URL set, where the store is"
        )
    if not config.allow_edit:
        raise Forbidden(
            "run management is off on this server: `rlvitals serve` turns it on when bound to "
            "127.0.0.1 (or set RLVITALS_DATASOURCE_EDIT=1); use `rlvitals runs delete|rename|"
            "note|tag` meanwhile"
        )
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site != "same-origin":
        raise Forbidden(
            f"refused a {site} request (Sec-Fetch-Site): runs are changed only from this "
            "server's own pages"
        )
    origin = request.headers.get("Origin")
    if origin is not None and origin != f"{request.scheme}://{request.host}":
        raise Forbidden(
            f"refused a request from Origin {origin[:100]!r}: runs are changed only from this "
            "server's own pages"
        )


def _text(body: dict[str, Any], key: str, *, empty_ok: bool = False) -> str:
    value = body.get(key)
    if not isinstance(value, str):
        raise BadRequest(f"field {key!r} must be a string, got {type(value).__name__}")
    if not empty_ok and not value:
        raise BadRequest(f"field {key!r} must not be empty")
    return value


def _tags(body: dict[str, Any], key: str) -> list[str]:
    value = body.get(key, [])
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise BadRequest(f"field {key!r} must be a list of strings")
    return value


def _apply(change: Any) -> Any:
    """Run a store change; its refusals as the HTTP status they mean."""
    config = services().config
    try:
        with Outbox(config.outbox_path) as box:
            return change(box, config.lifecycle.lease_ttl_s)
    except run_admin.UnknownRun as exc:
        raise NotFound(str(exc)) from None
    except (run_admin.RunInUse, run_admin.NameTaken) as exc:
        raise _Conflict(str(exc)) from None
    except run_admin.BadValue as exc:
        raise BadRequest(str(exc)) from None
    except OutboxError as exc:
        raise _Busy(str(exc).splitlines()[0]) from None


def _existing_store() -> None:
    if not services().config.outbox_path.exists():
        raise NotFound(f"no store at {services().config.outbox_path}: there are no runs to change")


@blueprint.delete("/api/run")
def delete() -> Response:
    body = json_body(empty_ok=False)
    run = _text(body, "run")
    _existing_store()
    counts = _apply(lambda box, ttl: run_admin.delete_run(box, run, lease_ttl_s=ttl))
    return jsonify({"ok": True, "run": run, "deleted": counts})


@blueprint.post("/api/run/rename")
def rename() -> Response:
    body = json_body(empty_ok=False)
    run, new = _text(body, "run"), _text(body, "to")
    _existing_store()
    _apply(lambda box, ttl: run_admin.rename_run(box, run, new, lease_ttl_s=ttl))
    return jsonify({"ok": True, "run": new, "renamed_from": run})


@blueprint.post("/api/run/notes")
def notes() -> Response:
    body = json_body(empty_ok=False)
    run, text = _text(body, "run"), _text(body, "notes", empty_ok=True)
    _existing_store()
    stored = _apply(lambda box, ttl: run_admin.set_notes(box, run, text))
    return jsonify({"ok": True, "run": run, "notes": stored})


@blueprint.post("/api/run/tags")
def tags() -> Response:
    body = json_body(empty_ok=False)
    run = _text(body, "run")
    add, remove = _tags(body, "add"), _tags(body, "remove")
    _existing_store()
    kept = _apply(lambda box, ttl: run_admin.set_tags(box, run, add, remove))
    return jsonify({"ok": True, "run": run, "tags": list(kept)})
