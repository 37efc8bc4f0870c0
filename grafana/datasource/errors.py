"""Errors a request handler raises; the app turns each into `{"error": message}` with its status."""

from __future__ import annotations

__all__ = ["ApiError", "BadRequest", "Forbidden", "NotFound", "Unauthorized", "Unavailable"]


class ApiError(Exception):
    """A request that cannot be answered; `status` is the HTTP status to send."""

    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(ApiError):
    status = 400


class Unauthorized(ApiError):
    status = 401


class Forbidden(ApiError):
    status = 403


class NotFound(ApiError):
    status = 404


class Unavailable(ApiError):
    """The history store cannot answer right now (database down or refusing)."""

    status = 503
