"""Generated Grafana files: dashboards, alert rules and datasource provisioning, from the registry.

`rlvitals build` calls `dashboard_files`, `alert_files` and `datasource_files`; each returns
{relative path: file text}. The live gauges the rules read are served by `exporter.prometheus.live_states`.
"""

from .alerts import alert_files, alert_rule_groups
from .provisioning import datasource_files
from .render import dashboard_files, dashboards, encode

__all__ = [
    "alert_files",
    "alert_rule_groups",
    "dashboard_files",
    "dashboards",
    "datasource_files",
    "encode",
]
