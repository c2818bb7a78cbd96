#!/usr/bin/env bash
# Rebuilds every samples/<family>/ checkpoint with the moepack binary (`moepack sample`).
# Usage: samples/regenerate.sh [path/to/moepack]   (default: $MOEPACK, else build/moepack)
# The output is byte-identical on every machine for the same moepack version.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
moepack="${1:-${MOEPACK:-$here/../build/moepack}}"
seed=0

# Families whose weights take one or two bytes each are committed with 2 experts (top-1 routing)
# so all committed binaries stay around 5.5 MB; the 4- and 6-bit families keep 4 (top-2).
# ct-w4a8-int8 counts as wide: int-quantized stores each int4 value in a whole byte.
wide_families=" ct-w8a16 ct-fp8-tensor ct-fp8-channel ct-fp8-block ct-w8a8-int8 ct-w4a8-int8 modelopt-fp8 modelopt-mxfp8 llama4-fp8 gptq-int8 deepseek-v3-fp8 deepseek-v4-fp8 qwen3-moe-bf16 mixtral-bf16 gpt-oss-bf16 "

families=$("$moepack" sample --list | awk '/^families:/ {on = 1; next} /^[^ ]/ {on = 0} on {print $1}')
for family in $families; do
  experts=4
  case "$wide_families" in *" $family "*) experts=2 ;; esac
  "$moepack" --quiet sample --family "$family" -o "$here/$family" --seed "$seed" --experts "$experts" --force
  echo "$family: $experts experts"
done

echo "committed binary bytes:"
du -cb "$here"/*/*.safetensors | tail -n 1
