#!/usr/bin/env bash
# Rewrites the `moepack targets` globs from this build's output: everything literal except the
# host entry, which describes the machine the tests run on.
#   tests/cli/golden/targets/regenerate-globs.sh [path/to/moepack]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
moepack="${1:-$here/../../../../build/moepack}"
"$moepack" targets | sed 's/^  host  host (.*/  host  host (*), */' > "$here/targets.stdout.glob"
"$moepack" targets --json | python3 -c '
import sys, re
text = sys.stdin.read()
start = text.index("\"resolves_to\": \"host (")
end = text.index("}", start)
block = "\"resolves_to\": \"host (*)\",\n      \"platform\": \"*\",\n      \"description\": \"*\",\n      \"capability\": *,\n      \"default_packages\": *\n...\n    "
sys.stdout.write(text[:start] + block + text[end:])
' > "$here/targets-json.stdout.glob"
