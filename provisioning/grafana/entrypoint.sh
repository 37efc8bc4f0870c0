#!/bin/sh
# Grafana's entrypoint in docker-compose.yml: give the dashboards the address browsers reach the
# rlvitals datasource at, then start Grafana.
#
# Every link of the bundle (panel descriptions, the glossary's data links, alert runbooks) is
# written `${RLVITALS_PUBLIC_URL}/terms/...`. Grafana expands environment variables in its
# provisioning files, alert rules included (pkg/services/provisioning/values/values.go), but not
# in dashboard files: so the dashboards are copied from the read-only mount into Grafana's data
# volume with the address filled in, on every start (a changed address takes effect on restart).
set -eu

src="${RLVITALS_DASHBOARDS_SRC:-/etc/rlvitals/dashboards}"
dst="${RLVITALS_DASHBOARDS_DIR:-/var/lib/grafana/dashboards/rlvitals}"
url="${RLVITALS_PUBLIC_URL:-}"

case "$url" in
  http://*|https://*) ;;
  *) echo "rlvitals: RLVITALS_PUBLIC_URL='$url' must be the datasource's address as browsers reach it (e.g. https://rl.example.org, or this host's :8686)" >&2; exit 2 ;;
esac
case "$url" in
  *[[:space:]\#\&\|\\\"\']*) echo "rlvitals: RLVITALS_PUBLIC_URL='$url' holds a character a link cannot carry" >&2; exit 2 ;;
esac
url="${url%/}"

rm -rf "$dst"
mkdir -p "$dst"
cp -R "$src/." "$dst/"
find "$dst" -type f -name '*.json' -exec sed -i "s|\${RLVITALS_PUBLIC_URL}|$url|g" {} +

exec "${GRAFANA_RUN:-/run.sh}" "$@"
