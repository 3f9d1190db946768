#!/usr/bin/env bash
# The C++ tests once more under AddressSanitizer + UndefinedBehaviorSanitizer (CI; issue 36): a second build of the
# sidecar in sidecar/build-asan with g++ -fsanitize=address,undefined -fno-sanitize-recover=all, then ctest.
# Any sanitizer report (memory error, leak, undefined behaviour) aborts the test that hit it and fails the run.
#   scripts/ctest-sanitized.sh            the default subset: every test but the CPU engine's (cpu.*) and the TT
#                                         engine's (tt.*) and the family/Seg checkpoint fixtures only they use
#   scripts/ctest-sanitized.sh --all      every test (sidecar/fuzz/README.md has the time each takes)
#   scripts/ctest-sanitized.sh [--all] -- CTEST ARGS..   e.g. -- -R decode
# The subset is everything that parses bytes from outside (decode, protocol, model/safetensors/config, the server's
# frames, slots and connections) plus preprocess and the engine API; cpu.* runs whole forwards at ASan speed.
# RFDETR_ASAN_JOBS (default 2) bounds the build's parallelism; the build and the tests run under `nice -n 15`.
set -euo pipefail
cd "$(dirname "$0")/.."
build=sidecar/build-asan
all=0
if [ "${1:-}" = "--all" ]; then all=1; shift; fi
[ "${1:-}" = "--" ] && shift
san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S sidecar -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS="$san" \
    -DCMAKE_EXE_LINKER_FLAGS="$san" -DCMAKE_SHARED_LINKER_FLAGS="$san" >/dev/null
fi
subset_targets=(decode-test protocol-test protocol-outputs-test protocol-rows-test rfdetr_model_tests server-test
                rfdetr-sidecar-test engine-api-test engine-task-test row-select-test preprocess-test rfdetr-synth
                rfdetr-decode rfdetr-sidecar)
subset_exclude='^(cpu|tt)\.|^synth_family_|^synth_seg-'
start=$(date +%s)
if [ $all = 1 ]; then
  nice -n 15 cmake --build "$build" -j "${RFDETR_ASAN_JOBS:-2}" >&2
else
  nice -n 15 cmake --build "$build" -j "${RFDETR_ASAN_JOBS:-2}" --target "${subset_targets[@]}" >&2
fi
built=$(date +%s)
# detect_leaks: LeakSanitizer on (the default on x86-64 Linux, said explicitly); halt_on_error: the first report
# ends the test. No suppressions: a report is fixed, never silenced.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
rc=0
if [ $all = 1 ]; then
  nice -n 15 ctest --test-dir "$build" --output-on-failure "$@" || rc=$?
else
  nice -n 15 ctest --test-dir "$build" --output-on-failure -E "$subset_exclude" "$@" || rc=$?
fi
echo "ctest-sanitized: build $((built - start)) s, ctest $(($(date +%s) - built)) s, exit $rc" >&2
exit $rc
