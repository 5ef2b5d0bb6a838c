# bench/wss_report.awk — turns the working-set guest's log (bench/60-wss.sh)
# into the per-phase table. Pages are 4 KiB; figures in MiB.
function mib(p) { return p * 4 / 1024 }
function kv(s, k,   i, a) { for (i = 2; i <= NF; i++) { split($i, a, "="); if (a[1] == k) return substr($i, length(k) + 2) } return "" }
# The truth lies in [lo, hi]: the hot set, and for the whole machine the hot
# set plus what else the guest held (not all of it touched in the window).
function ok(w, e, lo, hi) { d = w < lo ? lo - w : (w > hi ? w - hi : 0); return d <= 0.10 * lo || (d <= e && e <= 0.15 * lo) }
/^WSS-CASE / { c = $2; cases[++nc] = c; np[c] = 0; ns[c] = 0; next }
/^WSS-BASE / { base[c] = kv($0, "kb") / 1024; next }
/^WSS-PHASE / { t = kv($0, "t") + 0; h = kv($0, "hot"); n = ++np[c]; pt[c, n] = t; ph[c, n] = (h == "" ? -1 : h); next }
/^WSS-STAT / { n = ++ns[c]; st[c, n] = kv($0, "t") + 0; sw[c, n] = mib(kv($0, "wss")); se[c, n] = mib(kv($0, "err"))
  sn[c, n] = mib(kv($0, "need")); ss[c, n] = kv($0, "stall_ppm") + 0; sp[c, n] = mib(kv($0, "probed")); src[c] = kv($0, "source"); next }
/^WSS-TRUTH / { n = ++nt[c]; tt[c, n] = kv($0, "t") + 0; tv[c, n] = mib(kv($0, "pages")); next }
/^WSS-KNEE-LIMIT / { lim = kv($0, "mib"); limits[++nl] = lim; next }
/^WSS-KNEE / { run[lim] = kv($0, "seconds") + 0; next }
END {
  printf "  %-9s %5s %8s %9s %8s %6s %9s %7s %8s %9s  %s\n", "case", "hot", "truth", "estimate", "err±", "ratio", "converge", "stall%", "probed", "need", "source"
  within = 0; total = 0
  for (i = 1; i <= nc; i++) {
    c = cases[i]; if (c == "knee") continue
    for (p = 2; p < np[c]; p++) {
      ts = pt[c, p]; te = pt[c, p + 1]; lo = ph[c, p] + 0
      # The workload's own count of the pages it wrote within the window,
      # over the same last 15 s as the estimate (below its hot set when
      # refaults slow it down); the hot set when it did not report.
      tsum = 0; tk = 0; tlast = -1
      for (j = 1; j <= nt[c]; j++) {
        if (tt[c, j] > ts && tt[c, j] <= te) tlast = tv[c, j]
        if (tt[c, j] >= te - 15 && tt[c, j] <= te) { tsum += tv[c, j]; tk++ }
      }
      # A workload stalled in refaults may report seldom: its last count.
      if (tk) lo = tsum / tk; else if (tlast >= 0) lo = tlast
      tr = lo + base[c]
      sum = 0; se_ = 0; k = 0; stall = 0; ks = 0; conv = -1; need = 0; p0 = -1; p1 = 0
      for (j = 1; j <= ns[c]; j++) {
        if (st[c, j] < ts || st[c, j] > te) continue
        stall += ss[c, j]; ks++; need = sn[c, j]; if (p0 < 0) p0 = sp[c, j]; p1 = sp[c, j]
        if (!ok(sw[c, j], se[c, j], lo, tr)) conv = -1
        else if (conv < 0) conv = st[c, j] - ts
        if (st[c, j] >= te - 15) { sum += sw[c, j]; se_ += se[c, j]; k++ }
      }
      if (k == 0) { printf "  %-9s %5d  no samples\n", c, ph[c, p]; continue }
      est = sum / k; err = se_ / k; total++
      if (ok(est, err, lo, tr)) within++
      truth = sprintf("%.1f", lo); if (tr > lo) truth = sprintf("%.0f-%.0f", lo, tr)
      ratio = 1; if (est < lo) ratio = est / lo; if (est > tr) ratio = est / tr
      cv = "no"; if (conv >= 0) cv = sprintf("%ds", conv)
      pct = 0; if (ks) pct = stall / ks / 10000
      printf "  %-9s %5d %8s %9.1f %8.1f %6.2f %9s %7.3f %8.1f %9.1f  %s\n", c, ph[c, p], truth, est, err, ratio, cv, pct, p1 - p0, need, src[c]
    }
  }
  printf "  %d of %d phases within ±10 %% of the truth (or the truth inside an error bar ≤ ±15 %%)\n", within, total
  printf "  truth: the pages the workload wrote within the window (its own count, averaged over the phase's last 15 s like the estimate); for the whole machine up to that plus the Unevictable+AnonPages+Mapped the guest held with the agent running before the workload (ratio: to the nearer end)\n"
  printf "  stall%%: PSI some, share of the phase's time; probed: MiB the agent's probes took in the phase (the whole machine through the cgroup2 root's memory.reclaim; cglimit0 does not probe)\n"
  if (nl) {
    printf "  knee workload: 64 MiB written 40 times, runtime by memory.max:"
    for (i = 1; i <= nl; i++) printf " %s MiB %s;", limits[i], run[limits[i]] == "" ? ">60s" : run[limits[i]] "s"
    printf "\n"
    # The knee: going down, the last memory.max whose runtime is at most
    # twice the median of those above it (the host is shared: single runs
    # are noisy, the jump below the knee is not).
    knee = limits[1]
    for (i = 2; i <= nl; i++) {
      r = run[limits[i]]; if (r == "") break
      m = 0; for (j = 1; j < i; j++) v[++m] = run[limits[j]]
      for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++) if (v[b] < v[a]) { x = v[a]; v[a] = v[b]; v[b] = x }
      med = (m % 2) ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
      if (r > 2 * med) break
      knee = limits[i]
    }
    need = 0; w = 0; for (j = 1; j <= ns["knee"]; j++) { need = sn["knee", j]; w = sw["knee", j] }
    printf "  knee (the last memory.max, going down, within twice the median runtime above it): %s MiB; agent wss %.1f MiB, need (margin 5 %%) %.1f MiB: %+.1f %% of the knee\n", knee, w, need, (need / knee - 1) * 100
  }
}
