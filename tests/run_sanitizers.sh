#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer (g++ by default; set
# CXX=clang++ for clang). Configures BUILD_DIR with -DMOEPACK_SANITIZE=ON, builds everything and
# runs ctest. Any sanitizer report fails the test that triggered it (UBSan is non-recovering,
# ASan aborts on the first error).
#
#   tests/run_sanitizers.sh [BUILD_DIR] [-- extra ctest args]
set -euo pipefail

src="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$src/build-asan}"
[[ $# -gt 0 ]] && shift
[[ "${1:-}" == "--" ]] && shift

cmake -S "$src" -B "$build" -G Ninja -DMOEPACK_SANITIZE=ON -DMOEPACK_TESTS=ON -DMOEPACK_BENCH=OFF
ninja -C "$build" -j "${JOBS:-2}"
# detect_leaks: the suite must not leak either. halt_on_error/abort: a report is a failure.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
cd "$build" && ctest --output-on-failure "$@"
