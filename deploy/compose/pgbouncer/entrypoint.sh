#!/bin/sh
# Writes PgBouncer's user list from POSTGRES_PASSWORD (never into the image) and runs PgBouncer in the foreground.
set -eu
umask 077
password=$(printf '%s' "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}" | sed 's/"/""/g')
printf '"%s" "%s"\n' "${PGBOUNCER_USER:-svc}" "$password" > /tmp/userlist.txt
exec pgbouncer /etc/pgbouncer/pgbouncer.ini
