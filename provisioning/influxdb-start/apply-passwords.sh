# Applies the passwords in .env to the read-only and the exporter's InfluxDB users at every start
# of the influxdb service (the image applies them only when it creates the influxdb-data volume),
# or says why it cannot. Sourced by entrypoint.sh once the server answers, with INFLUX_CMD running
# one statement as the admin (as the image's init-influxdb.sh sets it); tried on a real InfluxDB
# by tests/grafana/test_compose_influx_passwords.py.

# an InfluxQL string literal: backslashes and single quotes escaped
rlvitals_quote() {
    printf "'%s'" "$(printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e "s/'/\\\\'/g")"
}

if ! $INFLUX_CMD "SHOW USERS" >/dev/null 2>&1; then
    echo "rlvitals: InfluxDB refused the admin login of INFLUXDB_ADMIN_USER with INFLUXDB_ADMIN_PASSWORD: the influxdb-data volume keeps the admin password it was created with, so the passwords in .env were NOT applied and this service stays unhealthy. Put back the admin password the volume was made with, or start from an empty volume (docs/compose.md, 'Changing a password in .env')." >&2
    return 1
fi
for rlvitals_user in READ EXPORTER; do
    if [ "$rlvitals_user" = READ ]; then
        rlvitals_name=$INFLUXDB_READ_USER rlvitals_password=$INFLUXDB_READ_USER_PASSWORD
    else
        rlvitals_name=$RLVITALS_EXPORTER_USER rlvitals_password=$RLVITALS_EXPORTER_PASSWORD
    fi
    if ! $INFLUX_CMD "SET PASSWORD FOR \"$rlvitals_name\" = $(rlvitals_quote "$rlvitals_password")"; then
        echo "rlvitals: could not set the password of InfluxDB user '$rlvitals_name' (INFLUXDB_${rlvitals_user}_USER in .env): was it renamed after the volume was created? See docs/compose.md, 'Changing a password in .env'." >&2
        return 1
    fi
done
echo "rlvitals: the InfluxDB read and exporter users' passwords are the ones in .env"
