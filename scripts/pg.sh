#!/usr/bin/env bash
# A private PostgreSQL cluster for tests and the demo; never the system one.
#
#   scripts/pg.sh start DIR   create (first time) and start a cluster in DIR,
#                             on a unix socket in DIR and a free 127.0.0.1 port
#   scripts/pg.sh stop DIR    stop it (fast shutdown), keep the data
#   scripts/pg.sh destroy DIR stop it and remove DIR
#   scripts/pg.sh env DIR     print PGHOST/PGPORT/PGUSER/PGDATABASE exports
#
# fsync and synchronous_commit stay ON: ramexd refuses a database without them
# and a crash test on such a database proves nothing. RAMEX_PG_UNSAFE_NOSYNC=1
# turns them off, for tests that say so.
set -euo pipefail

cmd=${1:-}; dir=${2:-}
[[ -n $cmd && -n $dir ]] || { sed -n '2,13p' "$0" >&2; exit 2; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[[ -x $pgbin/initdb ]] || { echo "pg: no PostgreSQL server binaries under /usr/lib/postgresql (run scripts/deps.sh)" >&2; exit 1; }

# initdb refuses root: as root, run the server as the `postgres` user.
as_pg() { if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
pguser=$( [[ $(id -u) -eq 0 ]] && echo postgres || id -un )

# The socket path must fit in sun_path (~107 bytes) and the server user must be
# able to reach the directory. When either fails (a deep checkout, or one under
# a 0700 home), keep the cluster in a short directory of its own and leave a
# link in DIR, so that DIR stays the one name callers use.
data=$dir/data
if [[ ! -e $data ]]; then
  need_link=0
  (( ${#dir} > 80 )) && need_link=1
  if [[ $(id -u) -eq 0 ]] && ! runuser -u postgres -- test -x "$dir" 2>/dev/null; then need_link=1; fi
  if (( need_link )); then
    alt=$(mktemp -d /tmp/ramex-pg.XXXXXX)
    chmod 0755 "$alt"
    ln -s "$alt" "$dir/cluster"
  else
    mkdir -p "$dir/cluster"
  fi
fi
cl=$(readlink -f "$dir/cluster")
data=$cl/data
[[ $(id -u) -eq 0 ]] && chown postgres:postgres "$cl"

running() { [[ -f $data/postmaster.pid ]] && as_pg "$pgbin/pg_ctl" -D "$data" status >/dev/null 2>&1; }

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

case $cmd in
start)
  if [[ ! -f $data/PG_VERSION ]]; then
    as_pg "$pgbin/initdb" -D "$data" -A trust -U "$pguser" -E UTF8 --locale=C.UTF-8 >"$cl/initdb.log" 2>&1 \
      || { cat "$cl/initdb.log" >&2; exit 1; }
  fi
  if ! running; then
    extra=""
    if [[ ${RAMEX_PG_UNSAFE_NOSYNC:-0} == 1 ]]; then
      echo "pg: WARNING: fsync and synchronous_commit are OFF (RAMEX_PG_UNSAFE_NOSYNC=1)" >&2
      extra="-c fsync=off -c synchronous_commit=off"
    fi
    # RAMEX_PG_OPTS: more server settings, e.g. for profiling
    # ("-c shared_preload_libraries=pg_stat_statements")
    extra="$extra ${RAMEX_PG_OPTS:-}"
    started=0
    for try in $(seq 1 50); do
      port=$(( 20000 + (RANDOM % 30000) ))
      port_free "$port" || continue
      if as_pg "$pgbin/pg_ctl" -D "$data" -l "$cl/log" -w -t 30 \
           -o "-k $cl -c listen_addresses=127.0.0.1 -p $port -c max_connections=200 $extra" start >/dev/null 2>&1; then
        started=1; break
      fi
    done
    (( started )) || { tail -n 20 "$cl/log" >&2; echo "pg: could not start the cluster in $dir" >&2; exit 1; }
    echo "$port" >"$cl/port"
    as_pg "$pgbin/psql" -h "$cl" -p "$port" -U "$pguser" -d postgres -qtAc \
      "SELECT 1 FROM pg_database WHERE datname='ramex'" | grep -q 1 \
      || as_pg "$pgbin/createdb" -h "$cl" -p "$port" -U "$pguser" ramex
  fi
  ;;
stop)
  if running; then as_pg "$pgbin/pg_ctl" -D "$data" -m fast -w stop >/dev/null; fi
  ;;
destroy)
  if running; then as_pg "$pgbin/pg_ctl" -D "$data" -m immediate -w stop >/dev/null; fi
  [[ -L $dir/cluster ]] && rm -rf "$(readlink -f "$dir/cluster")"
  rm -rf "$dir"
  exit 0
  ;;
env) ;;
*) echo "pg: unknown command '$cmd' (start, stop, destroy, env)" >&2; exit 2 ;;
esac

if [[ $cmd != stop ]]; then
  port=$(cat "$cl/port" 2>/dev/null || true)
  [[ -n $port ]] || { echo "pg: cluster in $dir has never been started" >&2; exit 1; }
  printf 'export PGHOST=%q PGPORT=%q PGUSER=%q PGDATABASE=ramex PGBIN=%q\n' "$cl" "$port" "$pguser" "$pgbin"
fi
