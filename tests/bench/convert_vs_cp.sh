#!/usr/bin/env bash
# Benchmark (not a test): `moepack convert` throughput on a real-shape gpt-oss-20b layer set,
# as a ratio to copying the same bytes with cp (page cache warm), and convert's peak RSS.
#
#   tests/bench/convert_vs_cp.sh [BUILD_DIR] [LAYERS] [TARGETS] [THREADS] [MOEPACK]
#
# SRC=DIR measures an existing checkpoint instead of the generated one (LAYERS is then ignored).
# TARGETS and THREADS may be lists ("sm90 cpu-amx", "1 2"): every pair is measured on the same
# source, each against its own cp runs interleaved with it (the machine may be shared and noisy:
# compare the ratios). MOEPACK overrides the binary (e.g. an older build, for a before/after).
#
# The checkpoint is header-faithful (moepack sample --real-shape gpt-oss-20b) with an all-zero
# data region: the packers' work does not depend on the values. It is made dense first (cp of a
# sparse file skips the holes without reading them, which would flatter cp), and cp is told to
# write every byte (--sparse=never), as convert does.
set -euo pipefail
build=${1:-build}
layers=${2:-4}
targets=${3:-sm90}
threads_list=${4:-0}
moepack=${5:-$build/moepack}
work=$(mktemp -d "${TMPDIR:-/tmp}/moepack-bench-XXXXXX")
trap 'rm -rf "$work"' EXIT

if [ -n "${SRC:-}" ]; then
  # An existing checkpoint instead (e.g. ../shared/bench/expert_ckpt.py OUT --layers 2: 848 MB of
  # random valid experts, the figure issue 23 asks for), copied densely like the sample.
  cp -r --sparse=never "$SRC" "$work/src"
else
  "$moepack" sample --family gpt-oss-mxfp4 --real-shape gpt-oss-20b --sparse --layers "$layers" -o "$work/sparse" >/dev/null
  cp -r --sparse=never "$work/sparse" "$work/src"
  rm -rf "$work/sparse"
fi
bytes=$(du -sb --apparent-size "$work/src" | cut -f1)
cat "$work"/src/*.safetensors >/dev/null  # warm the page cache

printf '%s, %s layers, %.2f GB, %s cores\n' "${SRC:-gpt-oss-20b real shape}" "$layers" "$(echo "$bytes/1000000000" | bc -l)" "$(nproc)"
for target in $targets; do
for threads in $threads_list; do
best_cp=""
best_convert=""
rss=""
cpu=""
for run in 1 2 3; do
  rm -rf "$work/cp" "$work/out"
  sync
  t0=$(date +%s.%N); cp -r --sparse=never "$work/src" "$work/cp"; sync; t1=$(date +%s.%N)
  cp_s=$(echo "$t1 - $t0" | bc -l)
  rm -rf "$work/cp"
  sync
  t0=$(date +%s.%N)
  /usr/bin/time -f "%M %U %S" -o "$work/rss" "$moepack" convert "$work/src" --target "$target" -o "$work/out" --allow-bad-values -q --threads "$threads"
  sync; t1=$(date +%s.%N)
  conv_s=$(echo "$t1 - $t0" | bc -l)
  if [ -z "$best_cp" ] || [ "$(echo "$cp_s < $best_cp" | bc -l)" = 1 ]; then best_cp=$cp_s; fi
  if [ -z "$best_convert" ] || [ "$(echo "$conv_s < $best_convert" | bc -l)" = 1 ]; then
    best_convert=$conv_s
    read -r rss user sys < "$work/rss"
    cpu="user $user s, sys $sys s"
  fi
done
printf '%s, --threads %s (0: all cores)\n' "$target" "$threads"
printf '  cp (best of 3):       %.2f s  %.2f GB/s\n' "$best_cp" "$(echo "$bytes/$best_cp/1000000000" | bc -l)"
printf '  convert (best of 3):  %.2f s  %.2f GB/s  (%s)\n' "$best_convert" "$(echo "$bytes/$best_convert/1000000000" | bc -l)" "$cpu"
printf '  convert time / cp time: %.2f   (throughput ratio convert/cp: %.2f)\n' "$(echo "$best_convert/$best_cp" | bc -l)" "$(echo "$best_cp/$best_convert" | bc -l)"
printf '  convert peak RSS: %d MiB\n' "$((rss / 1024))"
done
done
