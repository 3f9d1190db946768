// Compiles the CLI and the library (cli/, src/) to JavaScript in compiled/, so `rfdetr` starts without tsx's
// on-the-fly TypeScript transform (--version: 0.38 s of CPU through tsx, 0.12 s compiled; bench/cli-startup/RESULTS.md).
// Run by `npm install` (postinstall). Without TypeScript (an install that omits dev dependencies) it says so and
// leaves bin/rfdetr.js to run the sources through tsx.
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const out = path.join(root, 'compiled');
let tsc;
try {
  tsc = createRequire(path.join(root, 'package.json')).resolve('typescript/bin/tsc');
} catch {
  console.error('build-cli: typescript is not installed (dev dependencies omitted): bin/rfdetr.js runs the TypeScript sources through tsx');
  process.exit(0);
}
fs.rmSync(out, { recursive: true, force: true });
const r = spawnSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
if (r.status !== 0) {
  fs.rmSync(out, { recursive: true, force: true });
  console.error(`build-cli: tsc failed (exit ${r.status}); nothing was left in compiled/, bin/rfdetr.js runs the sources through tsx`);
  process.exit(1);
}
// The stamp bin/rfdetr.js compares the sources against: written last, so a half-written tree is never used.
fs.writeFileSync(path.join(out, '.built'), `${new Date().toISOString()}\n`);
console.error('build-cli: compiled/ is up to date');
