#!/usr/bin/env bash
# Bounded fuzzing for CI: configures and builds the clang libFuzzer build (ASan + UBSan) in
# BUILD_DIR, generates the seed corpora, and runs every fuzz target for a fixed number of
# executions (not wall time, so a run is reproducible in cost). Exit status is non-zero when a
# target crashes, hangs, leaks or reports undefined behaviour; the input is left under
# BUILD_DIR/fuzz-artifacts/<target>/.
#
#   tests/fuzz/run_fuzzers.sh [--runs N] [--build-dir DIR] [--jobs J] [--suite] [TARGET...]
#
# Defaults: 30000 runs per target, build dir build-fuzz next to the source tree, every target,
# 2 jobs (ninja's, and how many fuzz targets run at once).
# --suite also builds and runs the whole test suite in the same build (ASan + UBSan under clang,
# at -O1), so CI compiles the project once for both hardening jobs.
set -euo pipefail

src="$(cd "$(dirname "$0")/../.." && pwd)"
runs=30000
build="$src/build-fuzz"
jobs=2
suite=0
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --build-dir) build="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --suite) suite=1; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done

mkdir -p "$build"
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DMOEPACK_FUZZ=ON -DMOEPACK_TESTS=ON \
  -DMOEPACK_BENCH=OFF -DMOEPACK_WERROR=ON -DCMAKE_CXX_FLAGS_RELEASE=-O1 > "$build/fuzz-configure.log" 2>&1 || { cat "$build/fuzz-configure.log"; exit 1; }
if [[ ${#targets[@]} -eq 0 ]]; then
  for f in "$src"/tests/fuzz/fuzz_*.cpp; do t="$(basename "$f" .cpp)"; targets+=("${t#fuzz_}"); done
fi
ninja -C "$build" -j "$jobs" fuzz_make_seeds $(printf 'fuzz_%s ' "${targets[@]}")

status=0
if [[ $suite == 1 ]]; then
  ninja -C "$build" -j "$jobs"
  # Same options as tests/run_sanitizers.sh: any report fails the test that triggered it.
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=1:strict_string_checks=1}" \
  UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
    ctest --test-dir "$build" --output-on-failure -j "$jobs" || status=1
fi

seeds="$build/fuzz-seeds"
rm -rf "$seeds"
"$build/tests/fuzz/fuzz_make_seeds" "$seeds"

# One target's bounded run; its summary line goes to $build/fuzz-$t.result.
run_target() {
  local t=$1
  local corpus="$build/fuzz-corpus/$t"      # grows across runs; the seeds are read-only input
  local artifacts="$build/fuzz-artifacts/$t"
  mkdir -p "$corpus" "$artifacts" "$seeds/$t"
  local extra=()
  [[ -d "$src/tests/fuzz/regressions/$t" ]] && extra+=("$src/tests/fuzz/regressions/$t")
  # A target whose inputs are whole documents (a config plus a header) may raise the default
  # with a `// fuzz-max-len: N` line in its source.
  local max_len
  max_len=$(sed -n 's|^// fuzz-max-len: *\([0-9]*\).*|\1|p' "$src/tests/fuzz/fuzz_$t.cpp" | head -n 1)
  max_len=${max_len:-4096}
  # A target whose every input runs a whole pipeline (fuzz_verify_manifest converts and verifies)
  # may cap its executions with a `// fuzz-max-runs: N` line, so a CI run stays bounded.
  local runs_t
  runs_t=$(sed -n 's|^// fuzz-max-runs: *\([0-9]*\).*|\1|p' "$src/tests/fuzz/fuzz_$t.cpp" | head -n 1)
  runs_t=${runs_t:-$runs}
  (( runs_t > runs )) && runs_t=$runs
  local start verdict secs execs
  start=$(date +%s.%N)
  # -max_len bounds the mutated inputs (longer seeds are cut to it); -timeout turns a hang into a
  # failure; -rss_limit_mb catches an allocation sized by an unchecked field.
  if "$build/tests/fuzz/fuzz_$t" -runs="$runs_t" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
       -dict="$src/tests/fuzz/safetensors.dict" -artifact_prefix="$artifacts/" -print_final_stats=1 \
       "$corpus" "$seeds/$t" "${extra[@]}" > "$build/fuzz-$t.log" 2>&1; then
    verdict=ok
  else
    verdict=FAILED
  fi
  secs=$(echo "$(date +%s.%N) - $start" | bc)
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/fuzz-$t.log" | grep -o '[0-9]*$' || echo "?")
  printf '%-22s %-6s %10s execs %8.1f s  (log: %s)\n' "$t" "$verdict" "$execs" "$secs" "$build/fuzz-$t.log" > "$build/fuzz-$t.result"
}

# The targets run --jobs at a time (each is one process on one core); their lines print in
# target order once all have run.
for t in "${targets[@]}"; do
  rm -f "$build/fuzz-$t.result"
  while (( $(jobs -rp | wc -l) >= jobs )); do wait -n || true; done
  run_target "$t" &
done
wait
for t in "${targets[@]}"; do
  if [[ -f "$build/fuzz-$t.result" ]]; then cat "$build/fuzz-$t.result"; else echo "$t: no result (the run script failed)"; status=1; continue; fi
  if ! grep -q ' ok ' "$build/fuzz-$t.result"; then
    status=1
    tail -n 30 "$build/fuzz-$t.log"
  fi
done
exit $status
