#!/usr/bin/env bash
# Builds the protocol fuzzer with clang (sidecar/build-fuzz) and runs it for a bounded time.
#   sidecar/fuzz/run.sh [SECONDS]        default 60
# The corpus starts from the golden frames (test/fixtures/frames/*.bin); new inputs go to sidecar/build-fuzz/corpus.
# Exit status is the fuzzer's: 0 = no finding in the time given; findings are written as crash-* files.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-60}
build=sidecar/build-fuzz
CXX=${CXX:-clang++} cmake -S sidecar -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DRFDETR_BUILD_FUZZ=ON -DRFDETR_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target protocol-fuzz >&2
mkdir -p "$build/corpus" "$build/findings"
cp -n test/fixtures/frames/*.bin "$build/corpus/" 2>/dev/null || true
exec "$build/fuzz/protocol-fuzz" "$build/corpus" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 \
  -artifact_prefix="$build/findings/" -print_final_stats=1
