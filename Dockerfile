# The rlvitals image: the datasource (`rlvitals serve`) and the exporter sidecar (`rlvitals tail`).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY registry ./registry
COPY exporter ./exporter
COPY grafana ./grafana
COPY rlvitals ./rlvitals
RUN pip install . \
    && useradd --system --uid 10001 --home-dir /data rlvitals \
    && mkdir -p /data /runs && chown rlvitals /data

USER rlvitals
ENV RLVITALS_STORE=/data
EXPOSE 8686 9464
ENTRYPOINT ["rlvitals"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8686"]
