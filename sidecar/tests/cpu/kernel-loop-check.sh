#!/usr/bin/env bash
# The CPU engine's micro-kernels keep their accumulators in registers: no innermost loop of the named kernels that
# multiplies (an FMA, a vpmadd*, a dot product) also stores a vector register to the stack. GCC 12 spilled the fp32
# AVX2 kernel's twelve accumulators after every FMA when the epilogue indexed them by a run-time row (chunk256, fixed
# by storing the sums once after the k loop): the forward ran 2.2x slower on a Zen 3 (one 256-bit store a cycle) and
# nothing but a profile showed it; the int8 kernel had the same fault before (cpu README, "int8").
#   kernel-loop-check.sh LIBRARY KERNEL...   (KERNEL: a template name such as chunk256; every instance is checked)
# Exit 0 when every instance of every KERNEL was found and is clean; 1 naming each offending loop; 2 on usage or a
# kernel not found in LIBRARY (a renamed kernel must not pass by being missed).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: kernel-loop-check.sh LIBRARY KERNEL..." >&2; exit 2; }
lib=$1
shift
command -v objdump >/dev/null || { echo "kernel-loop-check: objdump (binutils) is needed" >&2; exit 2; }
[ -r "$lib" ] || { echo "kernel-loop-check: cannot read $lib" >&2; exit 2; }
status=0
for kernel in "$@"; do
  objdump -d --no-show-raw-insn -C "$lib" | awk -v kernel="$kernel" '
    # (POSIX awk: no strtonum) the value of a hex string.
    function hex(s,   i, v) {
      v = 0
      for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
      return v
    }
    # One function at a time: its instructions by address, then its loops (a jump back to an earlier address).
    function check(   i, j, n, a, inner, fma, spill) {
      if (!name) return
      found++
      for (i = 1; i <= nloop; i++) {
        inner = 1
        for (j = 1; j <= nloop; j++)
          if (j != i && lo[j] >= lo[i] && hi[j] <= hi[i] && (lo[j] != lo[i] || hi[j] != hi[i])) inner = 0
        if (!inner) continue
        fma = 0; spill = 0
        for (n = 1; n <= ninsn; n++) {
          a = addr[n]
          if (a < lo[i] || a > hi[i]) continue
          if (ins[n] ~ /^v(fn?madd|pmadd|pdpbusd|dpbusd|dpbf16)/) fma++
          if (ins[n] ~ /^vmov[a-z0-9]* %[xyz]mm[0-9]+,.*\(%rsp\)/) spill++
        }
        if (fma && spill) {
          printf "%s: innermost loop %x-%x: %d multiply-adds, %d vector stores to the stack\n", name, lo[i], hi[i], fma, spill
          bad++
        }
      }
    }
    /^[0-9a-f]+ <.*>:$/ {
      check(); name = ""; ninsn = 0; nloop = 0
      if (index($0, "::" kernel "<") || index($0, " " kernel "<")) { name = substr($0, index($0, kernel "<")); sub(/>\(.*/, ">", name) }
      next
    }
    name && /^ *[0-9a-f]+:\t/ {
      split($0, f, "\t"); gsub(/[ :]/, "", f[1]); a = hex(f[1]); ninsn++
      addr[ninsn] = a; ins[ninsn] = f[2]
      if (f[2] ~ /^j[a-z]+ +[0-9a-f]+ </) {
        split(f[2], g, /[ ]+/); t = hex(g[2])
        if (t < a) { nloop++; lo[nloop] = t; hi[nloop] = a }
      }
    }
    END {
      check()
      if (!found) { printf "kernel-loop-check: no instance of %s in the library\n", kernel; exit 2 }
      printf "%s: %d instances, %d loops spilling\n", kernel, found, bad
      exit bad ? 1 : 0
    }' || status=$(( status > $? ? status : $? ))
done
exit "$status"
