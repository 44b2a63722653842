#!/bin/sh
# Makes the nodes named as arguments (host:port, six of them) one Redis Cluster: three masters with a replica each.
# Run once by compose.yaml's redis-cluster-init; a cluster that already serves every slot is left as it is.
set -eu
first="$1"
info() { redis-cli -h "${first%:*}" -p "${first##*:}" cluster info | tr -d '\r'; }

if info | grep -qx 'cluster_slots_assigned:16384'; then
  echo "redis-cluster-init: the cluster exists"
  exit 0
fi
# CLUSTER MEET takes addresses, not names: resolve each.
nodes=""
for node in "$@"; do
  address=$(getent hosts "${node%:*}" | awk '{ print $1; exit }')
  [ -n "$address" ] || { echo "redis-cluster-init: cannot resolve ${node%:*}" >&2; exit 1; }
  nodes="$nodes $address:${node##*:}"
done
# shellcheck disable=SC2086
redis-cli --cluster create $nodes --cluster-replicas 1 --cluster-yes
# Done when every slot is served and the first node knows every replica (they join by gossip, a moment later).
replicas=$(($# / 2))
for _ in $(seq 1 60); do
  known=$(redis-cli -h "${first%:*}" -p "${first##*:}" cluster nodes | awk '$3 ~ /slave/' | wc -l)
  if info | grep -qx 'cluster_state:ok' && [ "$known" -eq "$replicas" ]; then
    echo "redis-cluster-init: cluster_state:ok, $replicas replicas"
    exit 0
  fi
  sleep 1
done
echo "redis-cluster-init: the cluster did not reach cluster_state:ok with $replicas replicas" >&2
exit 1
