#!/usr/bin/env bash
# The sidecar's libFuzzer targets (sidecar/fuzz/), built with clang + ASan + UBSan in sidecar/build-fuzz.
#   scripts/fuzz.sh build                  configure (clang++) and build every target
#   scripts/fuzz.sh run SECONDS [TARGET..] build, then run each target SECONDS (CI); default all targets;
#                                          RFDETR_FUZZ_JOBS (default 2) of them at a time
#   scripts/fuzz.sh long SECONDS [TARGET..] the same, but the new inputs are kept in sidecar/build-fuzz/corpus
#                                          for the next run (run starts from the committed seeds only), and a
#                                          finding does not stop the run (-fork=1 -ignore_crashes=1): every one
#                                          is collected in sidecar/build-fuzz/findings/
#   scripts/fuzz.sh repro TARGET FILE..    run the inputs once (a finding, a regression input)
# Seeds: sidecar/fuzz/corpus/TARGET/ (committed: fixtures, golden frames, the identity corpus, every past finding);
# dictionaries: sidecar/fuzz/dict/TARGET.dict when present. A crash, a sanitizer report, a leak, a timeout
# (-timeout, per input) or an out-of-memory is a finding: it is written to sidecar/build-fuzz/findings/ and the
# script exits non-zero. Runs under `nice -n 15` unless RFDETR_FUZZ_NICE=0 (the machine is shared).
# Prints one line per target: executions, coverage (libFuzzer's cov: edges, ft: features), corpus size.
set -euo pipefail
cd "$(dirname "$0")/.."
targets_all=(png-fuzz jpeg-fuzz protocol-fuzz shm-fuzz safetensors-fuzz config-fuzz)
build=sidecar/build-fuzz
nice_cmd=(nice -n "${RFDETR_FUZZ_NICE:-15}")

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

build_all() {
  # Debian's clang, and libclang-rt-dev: libFuzzer's and the sanitizers' runtimes (only a Recommends of clang's).
  local missing=() p
  for p in clang libclang-rt-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      echo "fuzz: installing ${missing[*]}" >&2
      export DEBIAN_FRONTEND=noninteractive
      apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
      apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >&2
    else
      echo "fuzz: missing ${missing[*]} (clang and libFuzzer's runtime); run:  sudo apt-get install -y ${missing[*]}" >&2
      exit 1
    fi
  fi
  if [ ! -f "$build/CMakeCache.txt" ]; then
    CXX=clang++ cmake -S sidecar -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRFDETR_BUILD_FUZZ=ON \
      -DRFDETR_BUILD_TESTS=OFF -DRFDETR_WERROR=OFF >/dev/null
  fi
  "${nice_cmd[@]}" cmake --build "$build" -j "${RFDETR_FUZZ_JOBS:-2}" --target "${targets_all[@]}" >&2
}

# run_one TARGET SECONDS KEEP: prints "TARGET: N execs in S s, cov C ft F, corpus K" or fails with the finding.
run_one() {
  local t=$1 secs=$2 keep=$3 work log dict=() more=() rc=0
  [ -d "sidecar/fuzz/corpus/$t" ] || { echo "fuzz: no seed corpus sidecar/fuzz/corpus/$t" >&2; exit 1; }
  [ -f "sidecar/fuzz/dict/$t.dict" ] && dict=(-dict="sidecar/fuzz/dict/$t.dict")
  if [ "$keep" = 1 ]; then
    work=$build/corpus/$t; mkdir -p "$work"
    more=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  else
    work=$(mktemp -d)
  fi
  mkdir -p "$build/findings" "$build/logs"
  log=$build/logs/$t.log
  "${nice_cmd[@]}" "$build/fuzz/$t" "$work" "sidecar/fuzz/corpus/$t" "${dict[@]}" "${more[@]}" -max_total_time="$secs" \
    -timeout=60 -rss_limit_mb=2048 -max_len="${RFDETR_FUZZ_MAX_LEN:-262144}" -print_final_stats=1 \
    -artifact_prefix="$build/findings/$t-" >"$log" 2>&1 || rc=$?
  local last execs
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  [ -n "$execs" ] || execs=$(sed -n 's/^#\([0-9]*\):.*/\1/p' "$log" | tail -1)  # fork mode
  echo "$t: ${execs:-?} execs in ${secs} s; last: ${last:-none}"
  [ "$keep" = 1 ] || rm -rf "$work"
  if [ "$keep" = 1 ] && ls "$build/findings/$t-"* >/dev/null 2>&1; then
    echo "$t: findings so far: $(ls "$build/findings/$t-"* | wc -l) in $build/findings/ ($log has the reports)" >&2
  fi
  if [ "$rc" != 0 ]; then
    echo "fuzz: $t FOUND A PROBLEM (exit $rc); the report follows, the input is in $build/findings/ (scripts/fuzz.sh repro $t FILE):" >&2
    grep -E -A40 'ERROR: |runtime error|==[0-9]+==|deadly signal|Test unit written' "$log" | head -80 >&2 || tail -40 "$log" >&2
    return 1
  fi
}

# run_all SECONDS KEEP TARGET..: RFDETR_FUZZ_JOBS targets at a time (default 2: each libFuzzer process is one
# thread, so on CI's 2 cores six targets take 3 x SECONDS instead of 6 x). Each target's lines are printed in the
# targets' order once it ends; exits non-zero when any target found a problem (or could not run).
run_all() {
  local secs=$1 keep=$2; shift 2
  local jobs=${RFDETR_FUZZ_JOBS:-2} out t fail=0 running
  out=$(mktemp -d)
  for t in "$@"; do
    while running=$(jobs -rp | wc -l) && [ "$running" -ge "$jobs" ]; do wait -n || true; done
    ( rc=0; run_one "$t" "$secs" "$keep" >"$out/$t.out" 2>"$out/$t.err" || rc=$?; echo "$rc" >"$out/$t.rc" ) &
  done
  wait
  for t in "$@"; do
    cat "$out/$t.out"; cat "$out/$t.err" >&2
    [ "$(cat "$out/$t.rc" 2>/dev/null)" = 0 ] || { fail=1; echo "fuzz: $t failed (above)" >&2; }
  done
  rm -rf "$out"
  return $fail
}
cmd=${1:-}; shift || true
case "$cmd" in
  build) build_all ;;
  run|long)
    secs=${1:?"fuzz: $cmd needs SECONDS per target"}; shift
    targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=("${targets_all[@]}")
    build_all
    run_all "$secs" "$([ "$cmd" = long ] && echo 1 || echo 0)" "${targets[@]}" ;;
  repro)
    t=${1:?"fuzz: repro needs TARGET FILE.."}; shift
    build_all
    "$build/fuzz/$t" -runs=1 "$@" ;;
  *) usage ;;
esac
