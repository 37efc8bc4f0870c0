"""The rlvitals Grafana datasource: a Flask app serving runs, cards, series, events and terms as
plain JSON (Infinity-friendly), HTML term pages, and the simpod JSON datasource protocol."""

from .app import create_app
from .config import ConfigError, DatasourceConfig
from .services import Services

__all__ = ["ConfigError", "DatasourceConfig", "Services", "create_app"]
