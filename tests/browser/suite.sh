#!/usr/bin/env bash
# tests/browser/suite.sh — the web pages in a real headless Chromium against
# a real ramexd and PostgreSQL. Run by tests/run.sh; can also be run alone
# from the repository root after `make`.
#
#   1. node unit tests of web/js/fmt.js and web/js/events.js (node --test)
#   2. builds the served tree (make web) and installs playwright-core from
#      the committed lock into $RAMEX_BUILD/browser-npm (never a browser
#      download: Debian's /usr/bin/chromium is used)
#   3. a fresh database (on the PostgreSQL tests/run.sh exported, or a
#      private one started here), `ramexd migrate`, an admin token from
#      `ramexd token create`, ramexd on a free 127.0.0.1 port serving
#      build/web
#   4. run.mjs: builds a small world through the API and drives the pages
#
# Screenshots and logs: $RAMEX_TEST_OUTPUT/browser/. Last line: "N passed,
# M failed". Everything started here is stopped on exit, even on failure.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${RAMEX_BUILD:-$ROOT/build}
OUT=${RAMEX_TEST_OUTPUT:-$ROOT/var/test-output}/browser
mkdir -p "$OUT"
rm -f "$OUT"/*.png

pass=0 fail=0
pids=() own_pg=""
finish() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do
		for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null
	done
	[[ -n $own_pg ]] && bash scripts/pg.sh destroy "$own_pg" >/dev/null 2>&1
	echo "$pass passed, $fail failed"
}
trap finish EXIT
trap 'exit 130' INT TERM
# setup failures count as one failed test, with the reason in the log
die() { echo "browser: $*" >&2; fail=$((fail + 1)); exit 1; }

# 1. fmt.js and the SSE parser in node
node --test --test-reporter=tap tests/browser/fmt_test.mjs tests/browser/events_test.mjs >"$OUT/fmt_test.tap" 2>&1
p=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$OUT/fmt_test.tap")
f=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$OUT/fmt_test.tap")
[[ -n $p && -n $f ]] || { p=0; f=1; }
echo "node tests: $p passed, $f failed"
(( f > 0 )) && grep -B2 -A12 '^not ok' "$OUT/fmt_test.tap" | head -60
pass=$((pass + p)) fail=$((fail + f))

# 2. what the pages and the driver need
command -v chromium >/dev/null || [[ -x /usr/bin/chromium ]] || die "no /usr/bin/chromium (run scripts/deps.sh)"
[[ -x $BUILD/bin/ramexd ]] || die "$BUILD/bin/ramexd is missing: run make"
make --no-print-directory BUILD="$BUILD" web >"$OUT/make-web.log" 2>&1 \
	|| { tail -n 20 "$OUT/make-web.log" >&2; die "make web failed"; }
npmdir=$BUILD/browser-npm
if ! cmp -s tests/browser/package-lock.json "$npmdir/package-lock.json" \
	|| [[ ! -d $npmdir/node_modules/playwright-core ]]; then
	mkdir -p "$npmdir"
	cp tests/browser/package.json tests/browser/package-lock.json "$npmdir/"
	(cd "$npmdir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --ignore-scripts \
		--no-audit --no-fund --loglevel=error) >"$OUT/npm.log" 2>&1 \
		|| { tail -n 20 "$OUT/npm.log" >&2; die "npm ci for playwright-core failed"; }
fi

# 3. PostgreSQL, a fresh database, ramexd
if [[ -z ${PGHOST:-} ]]; then
	own_pg=$ROOT/var/browser-pg
	bash scripts/pg.sh destroy "$own_pg" >/dev/null 2>&1
	bash scripts/pg.sh start "$own_pg" >"$OUT/pg.log" 2>&1 || { cat "$OUT/pg.log" >&2; die "could not start PostgreSQL"; }
	eval "$(bash scripts/pg.sh env "$own_pg")"
fi
pgbin=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)}
dbname=ramex_browser
"$pgbin/psql" -X -q -d postgres -c "DROP DATABASE IF EXISTS $dbname" -c "CREATE DATABASE $dbname" \
	>"$OUT/db.log" 2>&1 || { cat "$OUT/db.log" >&2; die "could not create database $dbname"; }
DB="host=$PGHOST port=$PGPORT dbname=$dbname user=$PGUSER"
log=$OUT/ramexd.log
: >"$log"
"$BUILD/bin/ramexd" migrate --db="$DB" >>"$log" 2>&1 || { tail -n 20 "$log" >&2; die "ramexd migrate failed"; }
admin=$("$BUILD/bin/ramexd" token create --role=admin --name=browser-admin --db="$DB" 2>>"$log") \
	|| { tail -n 20 "$log" >&2; die "ramexd token create failed"; }
portfile=$OUT/ramexd.port
rm -f "$portfile"
# not in a subshell: $! is ramexd itself, which run.mjs stops (SIGSTOP) and
# resumes to check the pages' live marks
"$BUILD/bin/ramexd" --listen=127.0.0.1:0 --db="$DB" --port_file="$portfile" \
	--web_root="$BUILD/web" >>"$log" 2>&1 &
ramexd_pid=$!
pids+=("$ramexd_pid")
for _ in $(seq 1 100); do [[ -s $portfile ]] && break; sleep 0.1; done
[[ -s $portfile ]] || { tail -n 20 "$log" >&2; die "ramexd did not start (see $log)"; }

# 4. the pages
# run.mjs loads playwright-core with require(), which honours NODE_PATH.
# timeout: the suite stops by itself even if a browser hangs.
RAMEX_URL="http://127.0.0.1:$(cat "$portfile")" RAMEX_PID=$ramexd_pid RAMEX_ADMIN_TOKEN=$admin RAMEX_BROWSER_OUT=$OUT \
	RAMEX_WEB_ROOT="$BUILD/web" RAMEX_BIN="$BUILD/bin" NODE_PATH=$npmdir/node_modules timeout -k 5 600 node tests/browser/run.mjs >"$OUT/run.log" 2>&1
rc=$?
cat "$OUT/run.log"
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$OUT/run.log" | tail -n 1)
if [[ $line =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
	pass=$((pass + BASH_REMATCH[1])) fail=$((fail + BASH_REMATCH[2]))
	(( rc != 0 && BASH_REMATCH[2] == 0 )) && fail=$((fail + 1))
else
	fail=$((fail + 1))
fi
exit 0
