#!/usr/bin/env bash
# Plots a soak's resident memory (and the series its /metrics exposed) from run_soak.sh's
# rss.tsv into a PNG, with gnuplot (Debian's gnuplot-nox).
#
#   bench/soak/plot_memory.sh SOAK_OUT [PNG]     (default PNG: bench/soak/memory.png)
set -euo pipefail
cd "$(dirname "$0")/../.."

out="${1:?usage: plot_memory.sh SOAK_OUT [PNG]}"
png="${2:-bench/soak/memory.png}"
command -v gnuplot > /dev/null || { echo "plot_memory.sh: needs gnuplot (apt-get install gnuplot-nox)" >&2; exit 2; }
[ -s "$out/rss.tsv" ] || { echo "plot_memory.sh: $out/rss.tsv is missing or empty" >&2; exit 2; }

gnuplot <<PLOT
set terminal pngcairo size 900,420 font ",10"
set output "$png"
set title "model-server under the soak: resident memory and exposed series"
set xlabel "minutes"
set ylabel "resident memory (MiB)"
set y2label "series in /metrics"
set ytics nomirror
set y2tics
set yrange [0:*]
set y2range [0:*]
set grid
set key bottom right
plot "$out/rss.tsv" using (\$1 / 60):(\$2 / 1024) skip 1 with lines lw 2 title "VmRSS", \
     "$out/rss.tsv" using (\$1 / 60):3 skip 1 axes x1y2 with steps title "series"
PLOT
echo "wrote $png"
