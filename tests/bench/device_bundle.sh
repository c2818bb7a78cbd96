#!/usr/bin/env bash
# Packs built binaries with this machine's loader and every shared library they link into one
# xz tarball, so they run on a host that has none of moepack's Debian dependencies (the GPU
# machine's host CPU: AMX, AVX-512 BF16, AVX-512F) whatever its own glibc:
#
#   tests/bench/device_bundle.sh OUT.tar.xz build/moepack build/tests/test_experts
#   # there:  mkdir b && tar -C b -xJf OUT.tar.xz && b/run.sh test_experts --gtest_brief=1
#   #         MOEPACK_CPU_ISA=avx512f b/run.sh moepack bench experts ART
#
# run.sh starts a binary through the bundled loader with the bundled libraries only. Binaries are
# stripped (the bundle must stay small enough to travel: oneDNN alone is 40 MB unpacked).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OUT.tar.xz BINARY..." >&2; exit 2; }
out=$1; shift
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for bin in "$@"; do
  cp "$bin" "$stage/bin/"
  strip "$stage/bin/$(basename "$bin")"
  # ldd's "name => path (address)" lines, and the loader's own absolute line.
  ldd "$bin" | awk '/=>/ && $3 ~ /^\// {print $3} $1 ~ /^\/.*ld-linux/ {print $1}' | while read -r lib; do cp -Ln "$lib" "$stage/lib/" 2>/dev/null || true; done
done
cat > "$stage/run.sh" <<'RUN'
#!/usr/bin/env bash
d=$(cd "$(dirname "$0")" && pwd)
exe=$1; shift
exec "$d/lib/ld-linux-x86-64.so.2" --library-path "$d/lib" "$d/bin/$exe" "$@"
RUN
chmod +x "$stage/run.sh"
tar -C "$stage" -cf - . | xz -T0 -6 > "$out"
echo "$out: $(du -h "$out" | cut -f1) ($(ls "$stage/bin" | tr '\n' ' ')and $(ls "$stage/lib" | wc -l) libraries)"
