#!/usr/bin/env bash
# PNG inflate benchmark (not a test): libdeflate vs Intel ISA-L on the IDAT streams of a PNG corpus (inflate-probe,
# thread CPU time), one Markdown row a file. The corpus (inflate-corpus.ts) goes to bench/decode/build/inflate-corpus.
#   bench/decode/inflate.sh [--runs N] [--isal-slack BYTES] [--isal-no-adler]     numbers: bench/decode/RESULTS.md
set -euo pipefail
. "$(dirname "$0")/../bench-build.sh"
bench_build -j 2 --target inflate-probe
corpus="$here/build/inflate-corpus"
[ -s "$corpus/screen--1920x1080-palette.png" ] || (cd "$root" && node --import tsx bench/decode/inflate-corpus.ts "$corpus")
"$here/build/inflate-probe" "$@" "$corpus"/*.png
