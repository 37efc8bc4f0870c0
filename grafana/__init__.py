"""Grafana side of rlvitals: the JSON datasource (`grafana.datasource`) and the dashboards."""

__all__: list[str] = []
