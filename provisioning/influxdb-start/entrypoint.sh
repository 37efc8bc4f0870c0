#!/bin/sh
# The influxdb service's entrypoint: the image's own (/entrypoint.sh, its first-start init
# included), then, once the real server answers, the passwords in .env applied to the service
# users (apply-passwords.sh). The health check asks for the marker this leaves, so the services
# that wait for a healthy InfluxDB never start against passwords it does not have.
/entrypoint.sh "$@" &
pid=$!
# `docker compose stop` signals this shell (PID 1): pass it on, and wait for the server to stop
trap 'kill -TERM "$pid" 2>/dev/null' TERM INT
rm -f /tmp/rlvitals-passwords-applied
# the image's init runs a temporary server on 127.0.0.1 only; the real one also listens on the
# container's own address
addr=$(hostname -i)
tries=0
until curl -sf "http://$addr:8086/ping" >/dev/null 2>&1; do
    tries=$((tries + 1))
    if [ "$tries" -gt 300 ] || ! kill -0 "$pid" 2>/dev/null; then
        echo "rlvitals: InfluxDB did not answer on $addr:8086; passwords not applied" >&2
        wait "$pid"
        exit $?
    fi
    sleep 1
done
INFLUX_CMD="influx -host $addr -port 8086 -username ${INFLUXDB_ADMIN_USER} -password ${INFLUXDB_ADMIN_PASSWORD} -execute "
if . /etc/rlvitals/apply-passwords.sh; then
    touch /tmp/rlvitals-passwords-applied
fi
status=0
while kill -0 "$pid" 2>/dev/null; do  # a signal interrupts `wait`; the server is still stopping
    wait "$pid"
    status=$?
done
exit "$status"
