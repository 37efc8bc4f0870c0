"""The sign-in page of a dashboard that needs `RLVITALS_DATASOURCE_TOKEN`.

A browser sends no bearer token by itself, so with a token set the run pages would answer 401.
This page asks for the token once; `grafana/datasource/login.py` checks it and sets a session
cookie the browser then sends with every page and API request of this server.
"""

from __future__ import annotations

from html import escape

__all__ = ["render_login"]

_WORDS = {
    "en": {
        "title": "rlvitals: sign in",
        "heading": "Sign in to this rlvitals dashboard",
        "explain": "This server is started with RLVITALS_DATASOURCE_TOKEN: paste that token once. "
        "The browser then keeps a session cookie for this server (30 days, or until you sign out).",
        "token": "Token",
        "submit": "Sign in",
    },
    "zh": {
        "title": "rlvitals：登录",
        "heading": "登录此 rlvitals 看板",
        "explain": "此服务设置了 RLVITALS_DATASOURCE_TOKEN：请粘贴该令牌一次。"
        "之后浏览器为此服务保存一个会话 cookie（30 天，或直到退出登录）。",
        "token": "令牌",
        "submit": "登录",
    },
}

_PAGE = """<!DOCTYPE html>
<html lang="{lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/live/report.css">
<link rel="stylesheet" href="/live/static/live.css">
<script src="/live/static/theme.js"></script>
</head>
<body data-lang="{lang}" class="live">
<main class="login">
<h1>{heading}</h1>
<p>{explain}</p>
<form id="login" data-next="{next}">
<label>{token} <input type="password" id="token" name="token" autocomplete="current-password" required autofocus></label>
<button type="submit">{submit}</button>
<p id="login-error" class="filter-error" role="alert" hidden></p>
</form>
</main>
<script src="/live/static/login.js"></script>
</body>
</html>
"""


def render_login(lang: str, next_path: str) -> str:
    """The page; `next_path` (a path on this server) is opened once the token is accepted."""
    words = _WORDS.get(lang, _WORDS["en"])
    return _PAGE.format(
        lang=escape(lang),
        next=escape(next_path, quote=True),
        **{k: escape(v) for k, v in words.items()},
    )
