"""`GET /api/health` (status for anyone, detail for a caller with the token), `GET /api/runs`
(each run's project, framework, status and what set it (`exporter.lifecycle`), last step and wall
time, start, tags, notes and colour: `run_meta`; with `shown`, a JSON list of run names, only
those runs, in the colours they are drawn in together, `page_colors`: what the Grafana charts
join to colour each run; and, where a forwarder sends the store to
InfluxDB, `forwarding`: what it said last, its backlog and rate) and `GET /api/run_state?run=R`
(one run's vital numbers, as of its end once it ended: `run_state.py`)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from rlvitals import __version__

from . import params
from .api_alert_notifications import notification_counts
from .errors import BadRequest
from .history import HistoryError
from .login_guard import bearer_verdict
from .reading import reading
from .run_meta import page_colors, read_forwarding, read_meta, run_colors, with_meta
from .run_state import run_state
from .run_summary import run_summary
from .services import services

__all__ = ["blueprint"]

blueprint = Blueprint("api_runs", __name__)
_log = logging.getLogger(__name__)
_UNAVAILABLE = "history store unavailable"
"""The reason a degraded health gives everyone: no address, URL, path or exception text."""
_FOLLOWER_FAILED = "the log follower failed and is being restarted"


@blueprint.get("/api/health")
def health() -> Response:
    """`status` "ok" or "degraded" (503: a health check reads the code), the version, and when
    degraded a short `reason`; to a caller trusted with it, the detail too: the store's kind, its
    run count or error, the registry's size, whether a token is required, and what is read
    (`reading`: the store, and for `serve LOGDIR` the folders and the follower's state and last
    error). A follower that failed and waits to restart makes health degraded too.

    Health is open, with no token, for compose and load-balancer checks. With a token configured,
    a caller without it gets no detail: the store's error text names where InfluxDB lives (URL,
    host, port, database) and what failed, which is for the operator, not for whoever can reach
    the port. With no token configured, every route, run data included, answers anyone who
    reaches the server (by default only loopback: `serve` binds 127.0.0.1 and the Host
    allowlist refuses DNS-rebinding pages), so hiding the detail there would protect nothing the
    other routes do not already show, and it is what one needs to fix a degraded store.
    """
    svc = services()
    store: dict[str, object] = {"kind": svc.store.kind, "ok": True}
    try:
        store["runs"] = len(svc.store.runs())
    except HistoryError as exc:
        store["ok"] = False
        store["error"] = str(exc)
        _log.warning("health: history store unavailable: %s", exc)
    out: dict[str, object] = {
        "status": "ok" if store["ok"] else "degraded",
        "version": __version__,
    }
    follower_failed = svc.follow_state is not None and svc.follow_state().state == "restarting"
    if not store["ok"]:
        out["reason"] = _UNAVAILABLE
    elif follower_failed:
        out.update(status="degraded", reason=_FOLLOWER_FAILED)
    if bearer_verdict(svc.logins, svc.config) in ("open", "right"):
        out.update(
            store=store,
            metrics=len(svc.registry.metrics),
            terms=len(svc.registry.terms),
            auth=svc.config.token is not None,
            reading=reading(svc),
        )
        out["logins"] = svc.logins.counts()
        out["alert_notifications"] = notification_counts(current_app)
        if svc.connection_stats is not None:
            out["connections"] = dict(svc.connection_stats())
    body = jsonify(out)
    # a health check (compose, a load balancer) reads the status code: the store being down is
    # not healthy, whatever the body says
    if out["status"] != "ok":
        body.status_code = 503
    return body


@blueprint.get("/api/runs")
def runs() -> Response:
    svc = services()
    now = time.time()
    meta = read_meta(svc.config.outbox_path)
    names = svc.store.runs()
    shown = _shown(request.args)
    if shown is None:
        colors = run_colors(names, meta)
    else:
        known = set(names)
        colors = page_colors([r for r in shown if r in known], names, meta)
        names = tuple(colors)
    out = [
        with_meta(run_summary(svc.store, svc.lifecycle, name, now), meta, colors[name])
        for name in names
    ]
    body: dict[str, object] = {"runs": out}
    forwarding = read_forwarding(svc.config.outbox_path, now)
    if forwarding is not None:  # only where a forwarder sends the store
        body["forwarding"] = forwarding
    return jsonify(body)


MAX_SHOWN = 1000
"""Runs one `shown` may name: more than any page draws."""


def _shown(args: Mapping[str, Any]) -> list[str] | None:
    """`shown`: a JSON list of run names (Grafana's `${run:json}`), distinct, in order; runs the
    store lacks are left out of the answer (InfluxDB can hold runs this store does not)."""
    raw = args.get("shown")
    if raw is None or raw == "":
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRequest(
            'parameter \'shown\' must be a JSON list of run names, e.g. shown=["run-a","run-b"]'
        )
    if len(value) > MAX_SHOWN:
        raise BadRequest(f"parameter 'shown' names {len(value)} runs; at most {MAX_SHOWN}")
    return list(dict.fromkeys(value))


@blueprint.get("/api/run_state")
def state() -> Response:
    svc = services()
    run = params.check_run(svc.store, request.args)
    lang = params.lang(request.args) or "en"
    return jsonify({"runs": [run_state(svc, run, lang)]})
