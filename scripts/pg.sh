#!/usr/bin/env bash
# A private PostgreSQL cluster for tests and the demo; never the system one.
#
#   scripts/pg.sh start DIR   create (first time) and start a cluster in DIR,
#                             on a unix socket in DIR and a free 127.0.0.1 port
#   scripts/pg.sh standby DIR create (first time, pg_basebackup) and start a
#                             streaming replica of DIR's running cluster in
#                             DIR/standby, on its own 127.0.0.1 port, and make
#                             it synchronous: from then on a COMMIT on the
#                             primary returns once the standby has it on disk
#   scripts/pg.sh kill DIR    kill -9 the primary and its processes (a
#                             machine gone; for failover tests)
#   scripts/pg.sh promote DIR failover: promote DIR/standby to primary
#                             (pg_ctl promote); the old primary must be gone
#   scripts/pg.sh unsync DIR  the standby is gone: the primary stops waiting
#                             for it (synchronous_standby_names = '')
#   scripts/pg.sh stop DIR    stop the cluster and its standby (fast), keep data
#   scripts/pg.sh destroy DIR stop both and remove DIR
#   scripts/pg.sh env DIR     print PGHOST/PGPORT/PGUSER/PGDATABASE exports, and
#                             with a standby RAMEX_PG_STANDBY_PORT and
#                             RAMEX_PG_FAILOVER_DB (the multi-host conninfo)
#
# A lone primary is the default; `standby` is the one way to get two servers
# (docs/operations.md, "A synchronous standby and failover").
#
# RAMEX_PG_PORT=N starts the server (start, standby) on port N rather than
# on a free one of its choosing.
#
# fsync and synchronous_commit stay ON: ramexd refuses a database without them
# and a crash test on such a database proves nothing. RAMEX_PG_UNSAFE_NOSYNC=1
# turns them off, for tests that say so.
set -euo pipefail

cmd=${1:-}; dir=${2:-}
[[ -n $cmd && -n $dir ]] || { sed -n '2,30p' "$0" >&2; exit 2; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[[ -x $pgbin/initdb ]] || { echo "pg: no PostgreSQL server binaries under /usr/lib/postgresql (run scripts/deps.sh)" >&2; exit 1; }

# initdb refuses root: as root, run the server as the `postgres` user.
as_pg() { if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
pguser=$( [[ $(id -u) -eq 0 ]] && echo postgres || id -un )

# The name synchronous_standby_names waits for (the standby's
# application_name in its primary_conninfo).
standby_name=ramex_standby

# The socket path must fit in sun_path (~107 bytes) and the server user must be
# able to reach the directory. When either fails (a deep checkout, or one under
# a 0700 home), keep the cluster in a short directory of its own and leave a
# link in DIR, so that DIR stays the one name callers use. Sets $cl, $data.
cluster_dir() { # DIR
  local d=$1
  if [[ ! -e $d/cluster ]]; then
    local need_link=0
    (( ${#d} > 80 )) && need_link=1
    if [[ $(id -u) -eq 0 ]] && ! runuser -u postgres -- test -x "$d" 2>/dev/null; then need_link=1; fi
    if (( need_link )); then
      local alt; alt=$(mktemp -d /tmp/ramex-pg.XXXXXX)
      chmod 0755 "$alt"
      ln -s "$alt" "$d/cluster"
    else
      mkdir -p "$d/cluster"
    fi
  fi
  cl=$(readlink -f "$d/cluster")
  data=$cl/data
  if [[ $(id -u) -eq 0 ]]; then chown postgres:postgres "$cl"; fi
}

running() { [[ -f $1/postmaster.pid ]] && as_pg "$pgbin/pg_ctl" -D "$1" status >/dev/null 2>&1; }

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Starts the server of $cl/$data on a free port; writes it to $cl/port.
start_server() {
  local extra="" started=0 port
  if [[ ${RAMEX_PG_UNSAFE_NOSYNC:-0} == 1 ]]; then
    echo "pg: WARNING: fsync and synchronous_commit are OFF (RAMEX_PG_UNSAFE_NOSYNC=1)" >&2
    extra="-c fsync=off -c synchronous_commit=off"
  fi
  # RAMEX_PG_OPTS: more server settings, e.g. for profiling
  # ("-c shared_preload_libraries=pg_stat_statements")
  extra="$extra ${RAMEX_PG_OPTS:-}"
  for try in $(seq 1 50); do
    # RAMEX_PG_PORT: this port, not a free one of its choosing (a
    # conninfo that names the standby before it exists)
    if [[ -n ${RAMEX_PG_PORT:-} ]]; then
      (( try > 1 )) && break
      port=$RAMEX_PG_PORT
    else
      port=$(( 20000 + (RANDOM % 30000) ))
    fi
    port_free "$port" || continue
    if as_pg "$pgbin/pg_ctl" -D "$data" -l "$cl/log" -w -t 60 \
         -o "-k $cl -c listen_addresses=127.0.0.1 -p $port -c max_connections=200 $extra" start >/dev/null 2>&1; then
      started=1; break
    fi
  done
  (( started )) || { tail -n 20 "$cl/log" >&2; echo "pg: could not start the cluster in $cl" >&2; exit 1; }
  echo "$port" >"$cl/port"
}

psql_at() { # CLUSTERDIR SQL
  as_pg "$pgbin/psql" -h "$1" -p "$(cat "$1/port")" -U "$pguser" -d postgres -X -qtAc "$2"
}

cluster_dir "$dir"
pcl=$cl pdata=$data
scl="" sdata=""
if [[ -e $dir/standby/cluster ]]; then
  cluster_dir "$dir/standby"; scl=$cl sdata=$data
  cl=$pcl data=$pdata
fi

case $cmd in
start)
  if [[ -n $sdata && -f $sdata/PG_VERSION && ! -f $sdata/standby.signal ]]; then
    echo "pg: the standby in $dir/standby was promoted: it is the primary now, and the old one must not take writes again (make it a new standby with pg_basebackup; docs/operations.md)" >&2
    exit 1
  fi
  if [[ ! -f $data/PG_VERSION ]]; then
    as_pg "$pgbin/initdb" -D "$data" -A trust -U "$pguser" -E UTF8 --locale=C.UTF-8 >"$cl/initdb.log" 2>&1 \
      || { cat "$cl/initdb.log" >&2; exit 1; }
  fi
  if ! running "$data"; then
    start_server
    port=$(cat "$cl/port")
    as_pg "$pgbin/psql" -h "$cl" -p "$port" -U "$pguser" -d postgres -qtAc \
      "SELECT 1 FROM pg_database WHERE datname='ramex'" | grep -q 1 \
      || as_pg "$pgbin/createdb" -h "$cl" -p "$port" -U "$pguser" ramex
  fi
  # a standby made before starts with it: the primary waits for it
  if [[ -n $sdata && -f $sdata/PG_VERSION ]] && ! running "$sdata"; then
    cl=$scl data=$sdata; start_server; cl=$pcl data=$pdata
  fi
  ;;
standby)
  running "$pdata" || { echo "pg: the cluster in $dir is not running: scripts/pg.sh start $dir first" >&2; exit 1; }
  pport=$(cat "$pcl/port")
  mkdir -p "$dir/standby"
  cluster_dir "$dir/standby"; scl=$cl sdata=$data
  if [[ ! -f $sdata/PG_VERSION ]]; then
    # -R writes standby.signal; the conninfo below is what the standby
    # streams from, named so that synchronous_standby_names finds it
    as_pg "$pgbin/pg_basebackup" -d "host=127.0.0.1 port=$pport user=$pguser application_name=$standby_name" \
      -D "$sdata" -X stream -c fast -R >"$scl/basebackup.log" 2>&1 \
      || { cat "$scl/basebackup.log" >&2; exit 1; }
    # The standby's own settings: once promoted it runs alone, so it must
    # not wait for a standby of its own (the primary's setting may have
    # been copied with the base backup)
    as_pg sh -c "cat >>'$sdata/postgresql.auto.conf'" <<CONF
primary_conninfo = 'host=127.0.0.1 port=$pport user=$pguser application_name=$standby_name'
synchronous_standby_names = ''
CONF
    rm -f "$sdata/postmaster.pid"
  fi
  if ! running "$sdata"; then start_server; fi
  # wait until it streams, then make the primary wait for it
  for _ in $(seq 1 300); do
    st=$(psql_at "$pcl" "SELECT state FROM pg_stat_replication WHERE application_name = '$standby_name'" || true)
    [[ $st == streaming ]] && break
    sleep 0.1
  done
  [[ ${st:-} == streaming ]] || { tail -n 20 "$scl/log" >&2; echo "pg: the standby in $dir/standby does not stream from the primary" >&2; exit 1; }
  # `on`: a COMMIT returns once the standby has flushed its WAL, so a
  # promoted standby holds every acknowledged transaction (remote_apply
  # would also wait for the replay, for reads; docs/operations.md)
  psql_at "$pcl" "ALTER SYSTEM SET synchronous_standby_names = '$standby_name'" >/dev/null
  psql_at "$pcl" "ALTER SYSTEM SET synchronous_commit = on" >/dev/null
  psql_at "$pcl" "SELECT pg_reload_conf()" >/dev/null
  for _ in $(seq 1 100); do
    st=$(psql_at "$pcl" "SELECT sync_state FROM pg_stat_replication WHERE application_name = '$standby_name'" || true)
    [[ $st == sync ]] && break
    sleep 0.1
  done
  [[ ${st:-} == sync ]] || { echo "pg: the standby streams but is not synchronous ($st)" >&2; exit 1; }
  cl=$pcl data=$pdata
  ;;
kill)
  # the postmaster first, so that nothing restarts the others
  if [[ -f $pdata/postmaster.pid ]]; then
    pid=$(head -n 1 "$pdata/postmaster.pid")
    kids=$(pgrep -P "$pid" || true)
    kill -9 "$pid" 2>/dev/null || true
    for k in $kids; do kill -9 "$k" 2>/dev/null || true; done
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  fi
  ;;
promote)
  [[ -n $scl ]] || { echo "pg: $dir has no standby (scripts/pg.sh standby $dir)" >&2; exit 1; }
  if running "$pdata"; then
    echo "pg: the primary in $dir still runs: stop it (or be sure it is gone) before promoting the standby; two primaries would each take writes" >&2
    exit 1
  fi
  as_pg "$pgbin/pg_ctl" -D "$sdata" -w -t 60 promote >/dev/null
  ;;
unsync)
  running "$pdata" || { echo "pg: the primary in $dir is not running" >&2; exit 1; }
  psql_at "$pcl" "ALTER SYSTEM SET synchronous_standby_names = ''" >/dev/null
  psql_at "$pcl" "SELECT pg_reload_conf()" >/dev/null
  ;;
stop)
  # the primary first: its fast shutdown sends the standby all of its WAL
  if running "$pdata"; then as_pg "$pgbin/pg_ctl" -D "$pdata" -m fast -w stop >/dev/null; fi
  if [[ -n $sdata ]] && running "$sdata"; then as_pg "$pgbin/pg_ctl" -D "$sdata" -m fast -w stop >/dev/null; fi
  ;;
destroy)
  if running "$pdata"; then as_pg "$pgbin/pg_ctl" -D "$pdata" -m immediate -w stop >/dev/null; fi
  if [[ -n $sdata ]] && running "$sdata"; then as_pg "$pgbin/pg_ctl" -D "$sdata" -m immediate -w stop >/dev/null; fi
  [[ -L $dir/standby/cluster ]] && rm -rf "$(readlink -f "$dir/standby/cluster")"
  [[ -L $dir/cluster ]] && rm -rf "$(readlink -f "$dir/cluster")"
  rm -rf "$dir"
  exit 0
  ;;
env) ;;
*) echo "pg: unknown command '$cmd' (start, standby, kill, promote, unsync, stop, destroy, env)" >&2; exit 2 ;;
esac

if [[ $cmd == start || $cmd == env || $cmd == standby ]]; then
  port=$(cat "$pcl/port" 2>/dev/null || true)
  [[ -n $port ]] || { echo "pg: cluster in $dir has never been started" >&2; exit 1; }
  printf 'export PGHOST=%q PGPORT=%q PGUSER=%q PGDATABASE=ramex PGBIN=%q\n' "$pcl" "$port" "$pguser" "$pgbin"
  if [[ -n $scl && -f $scl/port ]]; then
    sport=$(cat "$scl/port")
    printf 'export RAMEX_PG_STANDBY_HOST=%q RAMEX_PG_STANDBY_PORT=%q\n' "$scl" "$sport"
    printf 'export RAMEX_PG_FAILOVER_DB=%q\n' \
      "host=127.0.0.1,127.0.0.1 port=$port,$sport user=$pguser dbname=ramex target_session_attrs=read-write connect_timeout=2"
  fi
fi
