# bench/lib.sh — sourced by the benchmarks that need PostgreSQL and ramexd:
# a private cluster (fsync and synchronous_commit on, scripts/pg.sh) and an
# optimised ramexd on 127.0.0.1, both stopped when the script exits, also
# when it fails or is interrupted. Needs ROOT and the caller's `ramexd`.

bench_pids=()
bench_pgdir=
bench_cleanup() {
  local i
  for ((i = ${#bench_pids[@]} - 1; i >= 0; i--)); do
    kill "${bench_pids[i]}" 2>/dev/null && wait "${bench_pids[i]}" 2>/dev/null
  done
  [[ -n $bench_pgdir ]] && bash "$ROOT/scripts/pg.sh" destroy "$bench_pgdir" >/dev/null 2>&1
}
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

# bench_pg NAME PGDIR WORK: a fresh cluster in PGDIR (PG* exported, its
# conninfo in $db) and an empty WORK folder.
bench_pg() {
  bench_pgdir=$2
  bash "$ROOT/scripts/pg.sh" destroy "$2" >/dev/null 2>&1
  bash "$ROOT/scripts/pg.sh" start "$2" >/dev/null || { echo "$1: PostgreSQL did not start"; exit 1; }
  eval "$(bash "$ROOT/scripts/pg.sh" env "$2")"
  rm -rf "$3"; mkdir -p "$3"
  db="dbname=ramex host=$PGHOST port=$PGPORT user=$PGUSER"
}

# bench_admin NAME WORK: the first admin token into $admin.
bench_admin() {
  admin=$("$ramexd" token create --role=admin --name=bench --db="$db" 2>"$2/token.log") \
    || { echo "$1: could not create an admin token"; cat "$2/token.log"; exit 1; }
}

# bench_ramexd NAME WORK [FLAG...]: starts ramexd on a free 127.0.0.1 port
# (its log WORK/ramexd.log) and waits until it listens: $pid, $port, $url.
bench_ramexd() {
  local name=$1 work=$2
  shift 2
  rm -f "$work/port"
  (exec "$ramexd" --db="$db" --listen=127.0.0.1:0 --port_file="$work/port" "$@" 2>"$work/ramexd.log") &
  pid=$!
  bench_pids+=("$pid")
  for _ in $(seq 100); do [[ -s $work/port ]] && break; sleep 0.1; done
  port=$(cat "$work/port" 2>/dev/null) || { echo "$name: ramexd did not start"; cat "$work/ramexd.log"; exit 1; }
  url=http://127.0.0.1:$port
}
