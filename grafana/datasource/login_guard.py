"""Wrong tokens slowed and counted: a bearer token on any route, a token posted to `/api/login`.

Without this, 1,640 guesses a second went unanswered by anything but 401s (issue 39). Now:

- **Per client** (its address; an IPv6 client's /64, `grafana.serving.client_key`): the first
  `FREE_FAILURES` wrong tokens cost nothing (a mistyped paste), then each one more holds the
  client for twice as long as the last, from 1 s up to `MAX_HOLD_S`. While held its token is not
  checked at all: a request on run data gets 429 with `Retry-After` (so the answer tells nothing
  about the token), an open route (health, term pages) is answered as without a token. A client
  quiet for `FORGET_AFTER_S`, or that sends the right token, starts over.
- **In all**: wrong tokens from clients that have not sent the right one in the last
  `KNOWN_FOR_S` share `GLOBAL_PER_MINUTE` a minute; past that they are held too, so many
  addresses guessing together get no further than one. A client the token was right for
  (Grafana's datasource, a signed-in browser's address) is checked as before.

The counts are in `/api/health` (`logins`). Nothing here is logged per request: one line when
a client is first held, so a guessing run is seen without flooding the log.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from flask import Response, g, jsonify, request

from grafana.serving import client_key

from .config import DatasourceConfig

__all__ = [
    "FREE_FAILURES",
    "GLOBAL_PER_MINUTE",
    "MAX_HOLD_S",
    "Hold",
    "LoginGuard",
    "bearer_verdict",
    "held_response",
    "request_client",
]

FREE_FAILURES = 5
MAX_HOLD_S = 60.0
FORGET_AFTER_S = 900.0
GLOBAL_PER_MINUTE = 60
KNOWN_FOR_S = 86_400.0
_MAX_CLIENTS = 10_000  # memory bound: the longest-quiet clients are forgotten first
_G_KEY = "rlvitals_bearer_verdict"
_log = logging.getLogger("rlvitals.logins")


@dataclass(frozen=True)
class Hold:
    """A client's tokens are not checked for `seconds`: its own wrong tokens, or (`everyone`)
    the wrong tokens of all clients not known to have the right one."""

    seconds: float
    everyone: bool


@dataclass
class _Client:
    failures: int = 0
    last_failure: float = -math.inf
    held_until: float = -math.inf


class LoginGuard:
    """The wrong-token bookkeeping of one app (thread-safe)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._now = clock
        self._lock = threading.Lock()
        self._clients: OrderedDict[str, _Client] = OrderedDict()
        self._known: OrderedDict[str, float] = OrderedDict()  # client -> last right token
        self._allowance = float(GLOBAL_PER_MINUTE)
        self._refilled = clock()
        self.failed_total = 0
        self.held_total = 0

    def wait(self, client: str) -> Hold | None:
        """How long `client` must wait before its token is checked again, and why; None: check
        it now. A hold counts as one request held."""
        now = self._now()
        with self._lock:
            state = self._clients.get(client)
            hold = None
            if state is not None and state.held_until > now:
                hold = Hold(state.held_until - now, everyone=False)
            elif not self._is_known(client, now):
                self._refill(now)
                if self._allowance < 1:
                    hold = Hold((1 - self._allowance) * 60.0 / GLOBAL_PER_MINUTE, everyone=True)
            if hold is not None:
                self.held_total += 1
            return hold

    def failed(self, client: str) -> None:
        now = self._now()
        with self._lock:
            self.failed_total += 1
            state = self._clients.pop(client, None) or _Client()
            if now - state.last_failure > FORGET_AFTER_S:
                state = _Client()
            state.failures += 1
            state.last_failure = now
            over = state.failures - FREE_FAILURES
            if over > 0:
                first = state.held_until == -math.inf
                state.held_until = now + min(2.0 ** (over - 1), MAX_HOLD_S)
                if first:
                    _log.warning(
                        "rlvitals serve: %d wrong tokens from %s; its tokens are now checked "
                        "only after a growing wait (up to %g s); counts in /api/health",
                        state.failures,
                        client,
                        MAX_HOLD_S,
                    )
            self._clients[client] = state  # newest last
            while len(self._clients) > _MAX_CLIENTS:
                self._clients.popitem(last=False)
            if not self._is_known(client, now):
                self._refill(now)
                self._allowance -= 1

    def succeeded(self, client: str) -> None:
        now = self._now()
        with self._lock:
            self._clients.pop(client, None)
            self._known.pop(client, None)
            self._known[client] = now
            while len(self._known) > _MAX_CLIENTS:
                self._known.popitem(last=False)

    def counts(self) -> dict[str, int]:
        """For `/api/health`: wrong tokens, requests held unchecked, clients held now."""
        now = self._now()
        with self._lock:
            held_now = sum(1 for c in self._clients.values() if c.held_until > now)
            return {
                "wrong_tokens": self.failed_total,
                "held_unchecked": self.held_total,
                "clients_held_now": held_now,
            }

    def _is_known(self, client: str, now: float) -> bool:
        seen = self._known.get(client)
        return seen is not None and now - seen < KNOWN_FOR_S

    def _refill(self, now: float) -> None:
        self._allowance = min(
            float(GLOBAL_PER_MINUTE),
            self._allowance + (now - self._refilled) * GLOBAL_PER_MINUTE / 60.0,
        )
        self._refilled = now


def request_client() -> str:
    """The current request's client, as the guards count it."""
    return client_key(request.remote_addr or "")


def bearer_verdict(guard: LoginGuard, config: DatasourceConfig) -> str:
    """What the current request's `Authorization` header is worth, decided once per request:
    `"open"` (no token configured), `"absent"` (none sent), `"right"`, `"wrong"`, or `"held"`
    (not checked: the client must wait, `g` keeps how long)."""
    if _G_KEY in g:
        return str(g.get(_G_KEY))
    sent = request.headers.get("Authorization")
    client = request_client()
    if config.token is None:
        verdict = "open"
    elif sent is None:
        verdict = "absent"
    elif hold := guard.wait(client):
        g.rlvitals_hold = hold
        verdict = "held"
    elif config.accepts_token(sent):
        guard.succeeded(client)
        verdict = "right"
    else:
        guard.failed(client)
        verdict = "wrong"
    setattr(g, _G_KEY, verdict)
    return verdict


def held_response(hold: Hold | None = None) -> tuple[Response, int]:
    """429 with `Retry-After` for the current request, whose token was not checked (`hold`, or
    the hold `bearer_verdict` found)."""
    if hold is None:
        hold = g.rlvitals_hold
    assert hold is not None
    seconds = max(1, math.ceil(hold.seconds))
    if hold.everyone:
        why = (
            f"too many wrong tokens from many addresses at once (at most {GLOBAL_PER_MINUTE} a "
            f"minute in all): tokens from an address not yet seen with the right one are checked "
            f"again in {seconds} s"
        )
    else:
        why = (
            f"too many wrong tokens from this address: its token is not checked for {seconds} s "
            f"more (after {FREE_FAILURES} wrong ones each further one doubles the wait, up to "
            f"{MAX_HOLD_S:g} s; the right token clears it)"
        )
    response = jsonify({"error": why})
    response.headers["Retry-After"] = str(seconds)
    return response, 429
