#!/bin/sh
# Runs once after the influxdb image's initial setup. The admin token stays with the influxdb
# service; each other service gets a token with the least it needs, written to a volume only
# that service mounts: the exporter may write the bucket (nothing else), Grafana and the rlvitals
# datasource may read it (nothing else).
set -eu
bucket_id=$(influx bucket list --name "$DOCKER_INFLUXDB_INIT_BUCKET" --hide-headers | cut -f 1)
make_token() { # <file> <description> <permission flag>
    influx auth create --org "$DOCKER_INFLUXDB_INIT_ORG" --description "$2" "$3" "$bucket_id" \
        --hide-headers | cut -f 3 > "$1.tmp"
    chmod 0444 "$1.tmp"
    mv "$1.tmp" "$1"
}
make_token /tokens/exporter/token "rlvitals exporter (write)" --write-bucket
make_token /tokens/datasource/token "rlvitals datasource (read)" --read-bucket
make_token /tokens/grafana/token "grafana (read)" --read-bucket
