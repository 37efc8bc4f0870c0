"""The fixed datasource references every generated dashboard and alert rule points at.

The uids here are the ones `provisioning/datasources/rlvitals.yaml` declares, so provisioned
dashboards and rules find their datasources without any import step.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "DASHBOARD_SOURCES",
    "EXPR",
    "INFINITY",
    "INFLUX",
    "PROMETHEUS",
    "PUBLIC_API_URL",
    "PUBLIC_URL_SETTING",
    "DataSource",
]


@dataclass(frozen=True)
class DataSource:
    type: str
    uid: str
    name: str
    variable: str = ""
    """The dashboard variable (type `datasource`) that picks this datasource; its default is the
    provisioned one, so a dashboard imported into another Grafana asks for nothing else."""

    def ref(self) -> dict[str, str]:
        return {"type": self.type, "uid": self.uid}

    def variable_ref(self) -> dict[str, str]:
        """What panels and queries point at: the variable, so an import can re-point them."""
        return {"type": self.type, "uid": f"${{{self.variable}}}"}


INFLUX = DataSource("influxdb", "rlvitals-influxdb", "rlvitals InfluxDB", "datasource")
PROMETHEUS = DataSource("prometheus", "rlvitals-prometheus", "rlvitals Prometheus", "prometheus")
INFINITY = DataSource(
    "yesoreyeram-infinity-datasource", "rlvitals-api", "rlvitals API", "rlvitals_api"
)
EXPR = DataSource("__expr__", "__expr__", "Expression")
DASHBOARD_SOURCES: tuple[DataSource, ...] = (INFLUX, PROMETHEUS, INFINITY)

PUBLIC_URL_SETTING = "RLVITALS_PUBLIC_URL"
PUBLIC_API_URL = "${" + PUBLIC_URL_SETTING + "}"
"""Where a person's browser reaches the rlvitals datasource: every term-page link of the bundle
(panel descriptions, glossary data links, alert runbooks) starts with this placeholder, filled
in at deploy time from `RLVITALS_PUBLIC_URL` (compose's default: http://localhost:8686, what
works on the compose host). Grafana expands it in the alert rules itself (environment variables
in provisioning files); compose's Grafana entrypoint (provisioning/grafana/entrypoint.sh) fills
it into the dashboards, where Grafana expands none."""
