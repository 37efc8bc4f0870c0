# The exporter's InfluxDB user: it writes the database and keeps its rollups (`SELECT ... INTO`
# reads and writes it), nothing else. Sourced once, at the first start, by the influxdb image's
# init-influxdb.sh, which has by then made the admin (INFLUXDB_ADMIN_USER), the database
# (INFLUXDB_DB) and the read-only user Grafana and the datasource use (INFLUXDB_READ_USER, GRANT
# READ), and which sets INFLUX_CMD to run a statement as the admin
# (influxdata/influxdata-docker influxdb/1.8/init-influxdb.sh).
$INFLUX_CMD "CREATE USER \"$RLVITALS_EXPORTER_USER\" WITH PASSWORD '$RLVITALS_EXPORTER_PASSWORD'"
$INFLUX_CMD "REVOKE ALL PRIVILEGES FROM \"$RLVITALS_EXPORTER_USER\""
$INFLUX_CMD "GRANT ALL ON \"$INFLUXDB_DB\" TO \"$RLVITALS_EXPORTER_USER\""
