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

PUBLIC_API_URL = "http://localhost:8686"
"""Where a person's browser reaches the rlvitals datasource (compose binds it to 127.0.0.1:8686);
term-page links in descriptions and alert runbooks start here."""
