#!/usr/bin/env bash
# The C++ tests once more under AddressSanitizer + UndefinedBehaviorSanitizer (CI; issue 36): a second build of the
# sidecar in sidecar/build-asan with g++ -Og -fsanitize=address,undefined -fno-sanitize-recover=all (asserts on),
# then ctest. Any sanitizer report (memory error, leak, undefined behaviour) aborts the test that hit it and fails.
#   scripts/ctest-sanitized.sh            the parsers' tests: decode.*, model.*, protocol*, and the seed-1 checkpoint
#                                         fixture they use (41 build steps)
#   scripts/ctest-sanitized.sh --server   (CI) also the server's tests (frames, slots, connections, the test-double
#                                         sidecar), the engine API's and preprocess: every test but cpu.* and tt.*
#                                         (120 build steps, the CPU engine's kernels among them)
#   scripts/ctest-sanitized.sh --all      every test, the CPU engine's whole forwards (cpu.*) included
#   scripts/ctest-sanitized.sh [--server|--all] -- CTEST ARGS..   e.g. -- -R decode
# sidecar/fuzz/README.md has the times that chose the CI tier and -Og over -O1 (build 480 -> 341 s on 2 cores,
# the same planted overflow found). RFDETR_ASAN_JOBS (default 2) bounds the build's parallelism and ctest's; the
# build and the tests run under `nice -n 15`. -Werror is off here (the Release build enforces the warnings; GCC 12's
# -Wmaybe-uninitialized misfires on std::regex under ASan).
set -euo pipefail
cd "$(dirname "$0")/.."
build=sidecar/build-asan
tier=parsers
case "${1:-}" in --server) tier=server; shift ;; --all) tier=all; shift ;; esac
[ "${1:-}" = "--" ] && shift
san="-Og -g1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S sidecar -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Sanitize -DCMAKE_CXX_FLAGS="$san" -DRFDETR_WERROR=OFF \
    -DCMAKE_EXE_LINKER_FLAGS="$san" -DCMAKE_SHARED_LINKER_FLAGS="$san" >/dev/null
fi
parser_targets=(decode-test protocol-test protocol-outputs-test protocol-rows-test rfdetr_model_tests rfdetr-synth)
server_targets=(server-test rfdetr-sidecar-test engine-api-test engine-task-test row-select-test preprocess-test
                rfdetr-decode rfdetr-sidecar)
parser_tests='^(decode|model|protocol[a-z_0-9]*)\.|^synth_seed1_generate$'
server_exclude='^(cpu|tt)\.|^synth_family_|^synth_seg-|_NOT_BUILT$'
start=$(date +%s)
case $tier in
  parsers) nice -n 15 cmake --build "$build" -j "${RFDETR_ASAN_JOBS:-2}" --target "${parser_targets[@]}" >&2 ;;
  server) nice -n 15 cmake --build "$build" -j "${RFDETR_ASAN_JOBS:-2}" --target "${parser_targets[@]}" "${server_targets[@]}" >&2 ;;
  all) nice -n 15 cmake --build "$build" -j "${RFDETR_ASAN_JOBS:-2}" >&2 ;;
esac
built=$(date +%s)
# detect_leaks: LeakSanitizer on (the default on x86-64 Linux, said explicitly); halt_on_error: the first report
# ends the test. No suppressions: a report is fixed, never silenced.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
rc=0
case $tier in
  parsers) nice -n 15 ctest --test-dir "$build" --output-on-failure -j "${RFDETR_ASAN_JOBS:-2}" -R "$parser_tests" "$@" || rc=$? ;;
  server) nice -n 15 ctest --test-dir "$build" --output-on-failure -j "${RFDETR_ASAN_JOBS:-2}" -E "$server_exclude" "$@" || rc=$? ;;
  all) nice -n 15 ctest --test-dir "$build" --output-on-failure -j "${RFDETR_ASAN_JOBS:-2}" "$@" || rc=$? ;;
esac
echo "ctest-sanitized ($tier): build $((built - start)) s, ctest $(($(date +%s) - built)) s, exit $rc" >&2
exit $rc
