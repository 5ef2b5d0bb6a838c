# bench/lib.sh — sourced by the benchmarks that need PostgreSQL and ramexd:
# a private cluster (fsync and synchronous_commit on, scripts/pg.sh) and an
# optimised ramexd on 127.0.0.1, both stopped when the script exits, also
# when it fails or is interrupted. Needs ROOT and the caller's `ramexd`.

bench_pids=()
bench_pgdir= bench_work=
bench_wal_keep_mib=4096 # min_wal_size: the most WAL bench_wal_ahead can leave ready
# Stops what the benchmark started; its work folder (logs) stays only when
# it failed, for reading.
bench_cleanup() {
  local rc=$? i
  for ((i = ${#bench_pids[@]} - 1; i >= 0; i--)); do
    kill "${bench_pids[i]}" 2>/dev/null && wait "${bench_pids[i]}" 2>/dev/null
  done
  [[ -n $bench_pgdir ]] && bash "$ROOT/scripts/pg.sh" destroy "$bench_pgdir" >/dev/null 2>&1
  if [[ -n $bench_work ]]; then
    if ((rc == 0)); then rm -rf "$bench_work"; else echo "logs kept in $bench_work"; fi
  fi
  return "$rc"
}
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

# bench_pg NAME PGDIR WORK: a fresh cluster in PGDIR (PG* exported, its
# conninfo in $db) and an empty WORK folder. It keeps up to 4 GiB of WAL
# segments for reuse (min_wal_size), as a server sized for this write rate
# would; see bench_wal_ahead.
bench_pg() {
  bench_pgdir=$2
  bash "$ROOT/scripts/pg.sh" destroy "$2" >/dev/null 2>&1
  RAMEX_PG_OPTS="-c min_wal_size=${bench_wal_keep_mib}MB -c max_wal_size=$((bench_wal_keep_mib * 2))MB ${RAMEX_PG_OPTS:-}" \
    bash "$ROOT/scripts/pg.sh" start "$2" >/dev/null || { echo "$1: PostgreSQL did not start"; exit 1; }
  eval "$(bash "$ROOT/scripts/pg.sh" env "$2")"
  rm -rf "$3"; mkdir -p "$3"
  bench_work=$3
  db="dbname=ramex host=$PGHOST port=$PGPORT user=$PGUSER"
}

# bench_wal_ahead NAME MIB: makes MIB of WAL segments ahead of the load.
# A fresh cluster has none, so every 16 MiB of WAL the backend that crosses
# into a new segment creates and zero-fills it while holding the WAL write
# lock, and every commit waits: measured here, a stall of 15-65 ms every
# ~16 000 orders, which is most of a fresh cluster's p99 and max. A server
# that has run for a while reuses (renames) old segments instead, which
# costs nothing; switching through new segments and then checkpointing
# leaves the cluster in that state.
bench_wal_ahead() {
  local n=$(($2 / 16))
  psql -qtA -d "$db" -c "CREATE TABLE bench_wal_ahead (x int)" \
    -c "DO \$\$ BEGIN FOR i IN 1..$n LOOP INSERT INTO bench_wal_ahead VALUES (i); PERFORM pg_switch_wal(); END LOOP; END \$\$" \
    -c "DROP TABLE bench_wal_ahead" -c "CHECKPOINT" >/dev/null \
    || { echo "$1: could not make WAL segments ahead"; exit 1; }
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

# bench_market NAME: through ramexd's API (needs $url, $admin), a team with
# a seller and a buyer node ($sell, $buy), a trader token for the team
# ($trader) and the spot market, for loadgen's orders.
bench_market() {
  api() { # method path token body
    curl -sf -X "$1" -H "Authorization: Bearer $3" -H 'Content-Type: application/json' \
      ${4:+-d "$4"} "$url$2"
  }
  local team opacct op
  team=$(api POST /v1/teams "$admin" '{"name":"bench"}' | jq .id)
  sell=$(api POST /v1/nodes "$admin" "{\"name\":\"seller\",\"team_id\":$team}" | jq .account.id)
  buy=$(api POST /v1/nodes "$admin" "{\"name\":\"buyer\",\"team_id\":$team}" | jq .account.id)
  opacct=$(api POST /v1/accounts "$admin" '{"name":"operator","kind":"operator"}' | jq .id)
  op=$(api POST /v1/tokens "$admin" "{\"name\":\"op\",\"role\":\"operator\",\"account_id\":$opacct}" | jq -r .token)
  trader=$(api POST /v1/tokens "$admin" "{\"name\":\"tr\",\"role\":\"trader\",\"team_id\":$team}" | jq -r .token)
  api POST /v1/markets "$op" '{"name":"spot","tick":1000,"lot":256,"min_pages":256,"max_pages":1048576,"price_min":0,"price_max":1000000000,"notice_period_s":3600,"breach_penalty":0,"delivery_deadline_s":600}' >/dev/null \
    || { echo "$1: setup failed"; exit 1; }
}

# CPU ticks (user + system) so far of ramexd ($pid, or the pid given) and of
# every PostgreSQL process, from /proc: what an order costs, which the
# throughput alone hides when other work shares the cores.
cpu_rx() { awk '{print $14 + $15}' "/proc/${1:-$pid}/stat"; }
cpu_pg() {
  local pm t=0 p
  pm=$(head -n 1 "$PGHOST/data/postmaster.pid" 2>/dev/null) || { echo 0; return; }
  for p in $pm $(pgrep -P "$pm"); do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done
  echo "$t"
}
