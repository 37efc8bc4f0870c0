"""The fixed datasource references every generated dashboard and alert rule points at.

The uids here are the ones `provisioning/datasources/rlvitals.yaml` declares, so provisioned
dashboards and rules find their datasources without any import step.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EXPR", "INFINITY", "INFLUX", "PROMETHEUS", "PUBLIC_API_URL", "DataSource"]


@dataclass(frozen=True)
class DataSource:
    type: str
    uid: str
    name: str

    def ref(self) -> dict[str, str]:
        return {"type": self.type, "uid": self.uid}


INFLUX = DataSource("influxdb", "rlvitals-influxdb", "rlvitals InfluxDB")
PROMETHEUS = DataSource("prometheus", "rlvitals-prometheus", "rlvitals Prometheus")
INFINITY = DataSource("yesoreyeram-infinity-datasource", "rlvitals-api", "rlvitals API")
EXPR = DataSource("__expr__", "__expr__", "Expression")

PUBLIC_API_URL = "http://localhost:8686"
"""Where a person's browser reaches the rlvitals datasource (compose binds it to 127.0.0.1:8686);
term-page links in descriptions and alert runbooks start here."""
