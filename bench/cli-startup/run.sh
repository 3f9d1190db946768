#!/usr/bin/env bash
# `rfdetr --version` and `--help` start-up: the TypeScript sources through tsx (RFDETR_FROM_SOURCE=1, the
# baseline) against the compiled JavaScript (compiled/, `npm run build:cli`), interleaved in one run. Prints the
# median wall and CPU (user + sys) time per mode and the load average before and after. Usage: run.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-11}
[ -f compiled/.built ] || { echo "cli-startup: compiled/ is not built: npm run build:cli" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "load before: $(cat /proc/loadavg)"
for i in $(seq 1 "$runs"); do
  for args in --version --help; do
    for mode in source compiled; do
      e=$([ $mode = source ] && echo 1 || echo 0)
      RFDETR_FROM_SOURCE=$e /usr/bin/time -f "$mode $args %e %U %S" -a -o "$out" node bin/rfdetr.js $args >/dev/null
    done
  done
done
echo "load after:  $(cat /proc/loadavg)"
node -e '
const rows = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map((l) => l.split(" "));
const med = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
for (const args of ["--version", "--help"]) {
  const m = {};
  for (const mode of ["source", "compiled"]) {
    const r = rows.filter((x) => x[0] === mode && x[1] === args);
    m[mode] = { wall: med(r.map((x) => +x[2])), cpu: med(r.map((x) => +x[3] + +x[4])), n: r.length };
    console.log(`${args.padEnd(10)} ${mode.padEnd(9)} n=${m[mode].n} median wall ${m[mode].wall.toFixed(2)} s, cpu ${m[mode].cpu.toFixed(2)} s`);
  }
  console.log(`${args.padEnd(10)} compiled/source: wall ${(m.compiled.wall / m.source.wall).toFixed(2)}, cpu ${(m.compiled.cpu / m.source.cpu).toFixed(2)}`);
}' "$out"
