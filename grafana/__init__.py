"""Grafana side of rlvitals: the JSON datasource (`grafana.datasource`), the server it runs under
(`grafana.serving`), the dashboards and alert provisioning (`grafana.dashboards_gen`), and the
alert webhook's signature both sides share (`grafana.alert_webhook`)."""

__all__: list[str] = []
