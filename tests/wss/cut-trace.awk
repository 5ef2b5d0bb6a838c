# tests/wss/cut-trace.awk — cuts a replayable trace for test_mglru out of a
# working-set guest's log (bench/60-wss.sh; build/wss-bench/big.log):
#   awk -v case=cg -f tests/wss/cut-trace.awk build/wss-bench/big.log
# Output: "phase T HOT_MIB" ("end T" when the workload ends), "truth T
# PAGES" (the pages the workload wrote within the window, as it reports
# them every 2 s), then per monitor sample "sample T REFAULTS PSI_SOME_US
# UNEVICTABLE_PAGES MAJFAULTS COLLAPSED_PAGES" (the last: thp_collapse_alloc
# times 512, the 4 KiB pages of a 2 MiB huge page) followed by the
# cgroup's lru_gen section.
/^WSS-CASE / { on = ($2 == case); next }
!on { next }
/^WSS-PHASE / && /hot=/ { split($2, a, "="); split($3, b, "="); print "phase", a[2], b[2]; next }
/^WSS-PHASE / && / end/ { split($2, a, "="); print "end", a[2]; next }
/^WSS-TRUTH / { split($2, a, "="); split($3, b, "="); print "truth", a[2], b[2]; next }
/^WSS-TRACE / {
  split($2, a, "="); ref = 0; psi = -1; unev = 0; maj = 0; col = 0
  for (i = 3; i <= NF; i++) {
    if ($i == "unevictable") unev = $(i + 1) / 4096
    if ($i == "pgmajfault") maj = $(i + 1)
    if ($i == "thp_collapse_alloc") col = $(i + 1) * 512
    if ($i ~ /^workingset_refault_/) ref += $(i + 1)
    if ($i ~ /^total=/ && psi < 0) { split($i, b, "="); psi = b[2] }
  }
  print "sample", a[2], ref, psi, unev, maj, col; next
}
/^WSS-LRUGEN / { sub(/^WSS-LRUGEN /, ""); print }
