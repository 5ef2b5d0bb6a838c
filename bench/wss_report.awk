# bench/wss_report.awk — turns the working-set guest's log (bench/60-wss.sh)
# into the per-phase table. Pages are 4 KiB; figures in MiB.
function mib(p) { return p * 4 / 1024 }
function kv(s, k,   i, a) { for (i = 2; i <= NF; i++) { split($i, a, "="); if (a[1] == k) return substr($i, length(k) + 2) } return "" }
function ok(w, e, tr) { d = w - tr; if (d < 0) d = -d; return d <= 0.10 * tr || (d <= e && e <= 0.15 * tr) }
/^WSS-CASE / { c = $2; cases[++nc] = c; np[c] = 0; ns[c] = 0; next }
/^WSS-BASE / { base[c] = kv($0, "kb") / 1024; next }
/^WSS-PHASE / { t = kv($0, "t"); h = kv($0, "hot"); n = ++np[c]; pt[c, n] = t; ph[c, n] = (h == "" ? -1 : h); next }
/^WSS-STAT / { n = ++ns[c]; st[c, n] = kv($0, "t"); sw[c, n] = mib(kv($0, "wss")); se[c, n] = mib(kv($0, "err"))
  sn[c, n] = mib(kv($0, "need")); ss[c, n] = kv($0, "stall_ppm"); src[c] = kv($0, "source"); next }
/^WSS-KNEE-LIMIT / { lim = kv($0, "mib"); limits[++nl] = lim; next }
/^WSS-KNEE / { run[lim] = kv($0, "seconds"); next }
END {
  printf "  %-9s %5s %8s %9s %8s %6s %9s %7s %9s  %s\n", "case", "hot", "truth", "estimate", "err±", "ratio", "converge", "stall%", "need", "source"
  within = 0; total = 0
  for (i = 1; i <= nc; i++) {
    c = cases[i]; if (c == "knee") continue
    for (p = 2; p < np[c]; p++) {
      ts = pt[c, p]; te = pt[c, p + 1]; tr = ph[c, p] + base[c]
      sum = 0; se_ = 0; k = 0; stall = 0; ks = 0; conv = -1; need = 0
      for (j = 1; j <= ns[c]; j++) {
        if (st[c, j] < ts || st[c, j] > te) continue
        stall += ss[c, j]; ks++; need = sn[c, j]
        if (!ok(sw[c, j], se[c, j], tr)) conv = -1
        else if (conv < 0) conv = st[c, j] - ts
        if (st[c, j] >= te - 15) { sum += sw[c, j]; se_ += se[c, j]; k++ }
      }
      if (k == 0) { printf "  %-9s %5d  no samples\n", c, ph[c, p]; continue }
      est = sum / k; err = se_ / k; total++
      if (ok(est, err, tr)) within++
      printf "  %-9s %5d %8.1f %9.1f %8.1f %6.2f %9s %7.3f %9.1f  %s\n", c, ph[c, p], tr, est, err, est / tr,
        conv < 0 ? "no" : sprintf("%ds", conv), ks ? stall / ks / 10000 : 0, need, src[c]
    }
  }
  printf "  %d of %d phases within ±10 %% of the truth (or the truth inside an error bar ≤ ±15 %%)\n", within, total
  printf "  truth: the hot set, plus for the whole machine the Unevictable+AnonPages+Mapped the guest had with the agent running before the workload\n"
  printf "  stall%%: PSI some, share of time (the agent probes nothing: all of it is the workload's own)\n"
  if (nl) {
    b = run[limits[1]]; knee = limits[1]
    printf "  knee workload: 64 MiB written 20 times, runtime by memory.max:"
    for (i = 1; i <= nl; i++) printf " %s MiB %ss;", limits[i], run[limits[i]] == "" ? ">60" : run[limits[i]]
    printf "\n"
    for (i = 2; i <= nl; i++) { r = run[limits[i]]; if (r != "" && r <= 1.1 * b) knee = limits[i]; else break }
    need = 0; for (j = 1; j <= ns["knee"]; j++) need = sn["knee", j]
    printf "  knee (smallest memory.max within +10 %% of the unconstrained runtime): %s MiB; agent need (margin 5 %%): %.1f MiB, %+.1f %%\n", knee, need, (need / knee - 1) * 100
  }
}
