# /wss-lib.sh in the working-set guest (see tests/wss/guest.sh).
PAGE_KB=4

wss_setup() { # zram-MiB
  mount -t debugfs none /sys/kernel/debug
  mount -t cgroup2 none /sys/fs/cgroup
  insmod /lib/modules/zsmalloc.ko && insmod /lib/modules/zram.ko num_devices=1 &&
    echo "${1}M" >/sys/block/zram0/disksize && mkswap /dev/zram0 >/dev/null &&
    swapon /dev/zram0 || echo "WSS-INFO no zram swap"
  echo +memory >/sys/fs/cgroup/cgroup.subtree_control
  echo "x" >/secret
  echo "WSS-INFO lru_gen/enabled=$(cat /sys/kernel/mm/lru_gen/enabled 2>&1)" \
    "page_idle=$(ls /sys/kernel/mm/page_idle 2>/dev/null | tr '\n' ' ')" \
    "damon=$(ls /sys/kernel/mm/damon 2>/dev/null | tr '\n' ' ')" \
    "memory.reclaim=$(mkdir -p /sys/fs/cgroup/probe && [ -e /sys/fs/cgroup/probe/memory.reclaim ] && echo yes || echo no; rmdir /sys/fs/cgroup/probe)" \
    "root:$(cd /sys/fs/cgroup && for f in memory.reclaim memory.high memory.max memory.stat memory.pressure; do [ -e $f ] && printf ' %s' $f; done)" \
    "psi=$(head -c 40 /proc/pressure/memory)"
  echo "WSS-INFO thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled)" \
    "defrag=$(cat /sys/kernel/mm/transparent_hugepage/defrag)" \
    "khugepaged:$(cd /sys/kernel/mm/transparent_hugepage/khugepaged 2>/dev/null && for f in *; do printf ' %s=%s' $f "$(cat $f)"; done)"
}

# wss_agent NAME WINDOW_S EXTRA-ARGS...: starts the agent; its pid in AGENT
wss_agent() {
  local name=$1 win=$2
  shift 2
  rm -f /tmp/$name.status /tmp/$name.spool
  ramex-agent --exchange_url=http://127.0.0.1:9 --key_id=k --secret_file=/secret \
    --spool=/tmp/$name.spool --status_file=/tmp/$name.status --sample_s="${WSS_SAMPLE_S:-2}" \
    --window_s="$win" --events=0 --log_level=info "$@" >/tmp/$name.log 2>&1 &
  AGENT=$!
}

# wss_monitor NAME [CGROUP]: prints the agent's figures every 2.5 s, and with
# a cgroup the raw signals (lru_gen, refaults, PSI) the fixtures are cut from.
wss_monitor() {
  local name=$1 cg=$2 memcg
  [ -n "$cg" ] && memcg=${cg#/sys/fs/cgroup}
  while :; do
    if [ -f /tmp/$name.status ]; then
      awk -v n="$name" -v t="$(cut -d' ' -f1 /proc/uptime)" '
        /^ramex_agent_wss_pages /{w=$2} /^ramex_agent_wss_err_pages /{e=$2}
        /^ramex_agent_need_pages /{d=$2} /^ramex_agent_stall_ppm /{s=$2}
        /^ramex_agent_resident_pages /{r=$2} /^ramex_agent_probed_pages_total /{pr=$2} /^ramex_agent_thrashing /{th=$2} /^ramex_agent_collapsed_pages /{co=$2}
        /^ramex_agent_swapped_pages /{sw=$2} /^ramex_agent_comeback_rate_nps /{cb=$2}
        /^ramex_agent_wss_source/{split($1,a,"\""); src=a[2]}
        END{printf "WSS-STAT case=%s t=%s wss=%d err=%d need=%d resident=%d stall_ppm=%d source=%s probed=%d thrashing=%d collapsed=%d swapped=%d comeback_nps=%d\n", n,t,w,e,d,r,s,src,pr,th,co,sw,cb}' /tmp/$name.status
    fi
    if [ -n "$cg" ] && [ -n "$WSS_TRACE" ]; then
      echo "WSS-TRACE t=$(cut -d' ' -f1 /proc/uptime) $(grep -E '^(unevictable|anon_thp|thp_(fault|collapse)_alloc|workingset_(refault|activate|restore)_(anon|file)|pgmajfault|pgsteal|pgscan) ' $cg/memory.stat | tr '\n' ' ') current $(cat $cg/memory.current) swap $(cat $cg/memory.swap.current) $(tr '\n' ' ' <$cg/memory.pressure)"
      grep -A6 " $memcg\$" /sys/kernel/debug/lru_gen | sed 's/^/WSS-LRUGEN /'
    fi
    sleep 2
  done
}

wss_stop() { # pid...
  kill "$@" 2>/dev/null
  for p in "$@"; do wait "$p" 2>/dev/null; done
}
