"""rlvitals: the command line that ties the registry, exporter and Grafana bundle together."""

__all__ = ["__version__"]

__version__ = "0.1.0"
