"""How strong a shared secret of the datasource must be (`RLVITALS_DATASOURCE_TOKEN`,
`RLVITALS_ALERT_WEBHOOK_SECRET`).

At least `MIN_LENGTH` characters of which at least `MIN_DISTINCT` are different: that refuses
the short ones and the repeated ones (`aaaa…`, `changemechangeme`) that a guesser tries first. It
cannot tell a chosen phrase from a random one, so the message gives the command that makes a
random one (`MAKE_ONE`: 32 random bytes, 43 characters). Failed guesses are also slowed
(`login_guard.py`); a strong token is what makes guessing hopeless, not the slowing.
"""

from __future__ import annotations

__all__ = ["MAKE_ONE", "MIN_DISTINCT", "MIN_LENGTH", "weakness"]

MIN_LENGTH = 16
MIN_DISTINCT = 8
MAKE_ONE = 'python -c "import secrets; print(secrets.token_urlsafe(32))"'


def weakness(secret: str, setting: str) -> str | None:
    """Why `secret`, the value of `setting`, is too weak to use, or None. The message never
    shows the secret."""
    if len(secret) < MIN_LENGTH:
        why = f"has {len(secret)} character(s), fewer than {MIN_LENGTH}"
    elif len(set(secret)) < MIN_DISTINCT:
        why = f"has only {len(set(secret))} different characters (at least {MIN_DISTINCT})"
    else:
        return None
    return (
        f"{setting} is too weak: it {why}, which a guesser tries early. Make a random one with "
        f"`{MAKE_ONE}` and set it where {setting} is set (and where its users read it: Grafana's "
        "datasource in compose reads the same .env)"
    )
