#!/usr/bin/env bash
# A private PostgreSQL cluster for tests and the demo; never the system one.
#
#   scripts/pg.sh start DIR   create (first time) and start a cluster in DIR,
#                             on a unix socket in DIR and its 127.0.0.1 port
#                             (kept from its first start: below)
#   scripts/pg.sh standby DIR create (first time, pg_basebackup) and start a
#                             streaming replica of DIR's running cluster in
#                             DIR/standby, on its own kept 127.0.0.1 port, and make
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
# Ports: a cluster's first start picks a free 127.0.0.1 port below the
# kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range, from
# which the kernel picks the local end of every outgoing connection: a
# port there may be taken by any client while the server is stopped), and
# keeps it in DIR/port (DIR/standby/port for the standby); every later
# start, after a stop or a reboot, uses that port again, so PGPORT, a
# conninfo or the standby's primary_conninfo stay right. A kept port
# that another program holds is an error that says what to do.
#   scripts/pg.sh freeport    print a free port from that range (for a
#                             conninfo that names a server before it exists)
# RAMEX_PG_PORT=N starts the server (start, standby) on port N rather than
# on the kept one or a free one of its choosing, and keeps N.
#
# fsync and synchronous_commit stay ON: ramexd refuses a database without them
# and a crash test on such a database proves nothing. RAMEX_PG_UNSAFE_NOSYNC=1
# turns them off, for tests that say so.
set -euo pipefail

cmd=${1:-}; dir=${2:-}
[[ -n $cmd && ( -n $dir || $cmd == freeport ) ]] || { sed -n '2,39p' "$0" >&2; exit 2; }

# The ports a cluster may be given: below the ephemeral range when there is
# room (Linux's default is 32768-60999: 20000-32767 here), else above it.
port_range() { # sets plo, phi
  local elo=32768 ehi=60999
  if [[ -r /proc/sys/net/ipv4/ip_local_port_range ]]; then
    read -r elo ehi </proc/sys/net/ipv4/ip_local_port_range
  fi
  if (( elo - 1 >= 20000 + 1000 )); then plo=20000 phi=$((elo - 1))
  elif (( elo - 1 >= 10000 + 1000 )); then plo=10000 phi=$((elo - 1))
  elif (( ehi + 1 <= 65535 - 1000 )); then plo=$((ehi + 1)) phi=65535
  else
    echo "pg: the kernel's ephemeral port range ($elo-$ehi, net.ipv4.ip_local_port_range) leaves no 1000 ports for a server; narrow it, or set RAMEX_PG_PORT" >&2
    exit 1
  fi
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A free port from port_range, or exit 1.
free_port() {
  local plo phi p
  port_range
  for _ in $(seq 1 200); do
    p=$(( plo + (RANDOM * 32768 + RANDOM) % (phi - plo + 1) ))
    if port_free "$p"; then echo "$p"; return 0; fi
  done
  echo "pg: no free port found in $plo-$phi" >&2
  exit 1
}

if [[ $cmd == freeport ]]; then free_port; exit 0; fi

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
  pfile=$d/port
  # a cluster made before the port was kept in DIR: its last port
  if [[ ! -s $pfile && -s $cl/port ]]; then cp "$cl/port" "$pfile"; fi
  if [[ $(id -u) -eq 0 ]]; then chown postgres:postgres "$cl"; fi
}

running() { [[ -f $1/postmaster.pid ]] && as_pg "$pgbin/pg_ctl" -D "$1" status >/dev/null 2>&1; }

# Starts the server of $cl/$data on its port: RAMEX_PG_PORT, else the one
# kept in $pfile (its cluster's DIR/port), else a free one, which is kept
# there.
start_server() {
  local extra="" started=0 port try
  if [[ ${RAMEX_PG_UNSAFE_NOSYNC:-0} == 1 ]]; then
    echo "pg: WARNING: fsync and synchronous_commit are OFF (RAMEX_PG_UNSAFE_NOSYNC=1)" >&2
    extra="-c fsync=off -c synchronous_commit=off"
  fi
  # RAMEX_PG_OPTS: more server settings, e.g. for profiling
  # ("-c shared_preload_libraries=pg_stat_statements")
  extra="$extra ${RAMEX_PG_OPTS:-}"
  local kept="" why=""
  [[ -s $pfile ]] && kept=$(cat "$pfile")
  if [[ -n ${RAMEX_PG_PORT:-} ]]; then
    kept=$RAMEX_PG_PORT why="RAMEX_PG_PORT"
  elif [[ -n $kept ]]; then
    why="kept in $pfile since the cluster was made"
  fi
  if [[ -n $kept ]]; then
    [[ $kept =~ ^[0-9]+$ ]] && (( kept >= 1 && kept <= 65535 )) \
      || { echo "pg: port '$kept' ($why) is not a port number" >&2; exit 1; }
    if ! port_free "$kept"; then
      echo "pg: port $kept ($why) is taken by another program on 127.0.0.1 (\`ss -tanp | grep :$kept\` says which)." >&2
      echo "pg: stop that program and start again; or, to move this cluster, remove $pfile (a new port is chosen and kept; every client, PGPORT and a standby's primary_conninfo must then be told)." >&2
      exit 1
    fi
  fi
  for try in $(seq 1 20); do
    if [[ -n $kept ]]; then
      (( try > 1 )) && break
      port=$kept
    else
      port=$(free_port)
    fi
    if as_pg "$pgbin/pg_ctl" -D "$data" -l "$cl/log" -w -t 60 \
         -o "-k $cl -c listen_addresses=127.0.0.1 -p $port -c max_connections=200 $extra" start >/dev/null 2>&1; then
      started=1; break
    fi
  done
  (( started )) || { tail -n 20 "$cl/log" >&2; echo "pg: could not start the cluster in $cl${kept:+ on port $kept ($why)}" >&2; exit 1; }
  echo "$port" >"$pfile"
  rm -f "$cl/port" # where it was kept before
}

psql_at() { # DIR SQL (DIR: the primary's, or DIR/standby)
  as_pg "$pgbin/psql" -h "$(readlink -f "$1/cluster")" -p "$(cat "$1/port")" -U "$pguser" -d postgres -X -qtAc "$2"
}

cluster_dir "$dir"
pcl=$cl pdata=$data ppf=$pfile
scl="" sdata="" spf=""
if [[ -e $dir/standby/cluster ]]; then
  cluster_dir "$dir/standby"; scl=$cl sdata=$data spf=$pfile
  cl=$pcl data=$pdata pfile=$ppf
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
    port=$(cat "$pfile")
    as_pg "$pgbin/psql" -h "$cl" -p "$port" -U "$pguser" -d postgres -qtAc \
      "SELECT 1 FROM pg_database WHERE datname='ramex'" | grep -q 1 \
      || as_pg "$pgbin/createdb" -h "$cl" -p "$port" -U "$pguser" ramex
  fi
  # a standby made before starts with it: the primary waits for it
  if [[ -n $sdata && -f $sdata/PG_VERSION ]] && ! running "$sdata"; then
    cl=$scl data=$sdata pfile=$spf; start_server; cl=$pcl data=$pdata pfile=$ppf
  fi
  ;;
standby)
  running "$pdata" || { echo "pg: the cluster in $dir is not running: scripts/pg.sh start $dir first" >&2; exit 1; }
  pport=$(cat "$dir/port")
  mkdir -p "$dir/standby"
  cluster_dir "$dir/standby"; scl=$cl sdata=$data spf=$pfile
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
    st=$(psql_at "$dir" "SELECT state FROM pg_stat_replication WHERE application_name = '$standby_name'" || true)
    [[ $st == streaming ]] && break
    sleep 0.1
  done
  [[ ${st:-} == streaming ]] || { tail -n 20 "$scl/log" >&2; echo "pg: the standby in $dir/standby does not stream from the primary" >&2; exit 1; }
  # `on`: a COMMIT returns once the standby has flushed its WAL, so a
  # promoted standby holds every acknowledged transaction (remote_apply
  # would also wait for the replay, for reads; docs/operations.md)
  psql_at "$dir" "ALTER SYSTEM SET synchronous_standby_names = '$standby_name'" >/dev/null
  psql_at "$dir" "ALTER SYSTEM SET synchronous_commit = on" >/dev/null
  psql_at "$dir" "SELECT pg_reload_conf()" >/dev/null
  for _ in $(seq 1 100); do
    st=$(psql_at "$dir" "SELECT sync_state FROM pg_stat_replication WHERE application_name = '$standby_name'" || true)
    [[ $st == sync ]] && break
    sleep 0.1
  done
  [[ ${st:-} == sync ]] || { echo "pg: the standby streams but is not synchronous ($st)" >&2; exit 1; }
  cl=$pcl data=$pdata pfile=$ppf
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
  psql_at "$dir" "ALTER SYSTEM SET synchronous_standby_names = ''" >/dev/null
  psql_at "$dir" "SELECT pg_reload_conf()" >/dev/null
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
  port=$(cat "$dir/port" 2>/dev/null || true)
  [[ -n $port ]] || { echo "pg: cluster in $dir has never been started" >&2; exit 1; }
  printf 'export PGHOST=%q PGPORT=%q PGUSER=%q PGDATABASE=ramex PGBIN=%q\n' "$pcl" "$port" "$pguser" "$pgbin"
  if [[ -n $scl && -s $dir/standby/port ]]; then
    sport=$(cat "$dir/standby/port")
    printf 'export RAMEX_PG_STANDBY_HOST=%q RAMEX_PG_STANDBY_PORT=%q\n' "$scl" "$sport"
    printf 'export RAMEX_PG_FAILOVER_DB=%q\n' \
      "host=127.0.0.1,127.0.0.1 port=$port,$sport user=$pguser dbname=ramex target_session_attrs=read-write connect_timeout=2"
  fi
fi
