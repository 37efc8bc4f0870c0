#!/bin/sh
# Runs once after the influxdb image's initial setup: map the InfluxQL database/retention policy
# that Grafana and the rlvitals datasource query (database = the bucket name) onto the bucket.
set -eu
bucket_id=$(influx bucket list --name "$DOCKER_INFLUXDB_INIT_BUCKET" --hide-headers | cut -f 1)
influx v1 dbrp create --bucket-id "$bucket_id" --db "$DOCKER_INFLUXDB_INIT_BUCKET" --rp autogen --default
