#!/usr/bin/env node
// The `rfdetr` command. Runs the compiled JavaScript (compiled/, built by `npm install`: start-up without the
// TypeScript transform) when it is at least as new as every source file; otherwise the TypeScript sources
// through tsx, so an edited checkout never runs a stale build. The check stats ~150 files (about 2 ms).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function newestSource() {
  let newest = 0;
  const visit = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) visit(p);
      else if (e.name.endsWith('.ts')) newest = Math.max(newest, fs.statSync(p).mtimeMs);
    }
  };
  for (const d of ['cli', 'src']) visit(path.join(root, d));
  for (const f of ['tsconfig.json', 'tsconfig.build.json']) newest = Math.max(newest, fs.statSync(path.join(root, f)).mtimeMs);
  return newest;
}

function compiledIsFresh() {
  if (process.env.RFDETR_FROM_SOURCE === '1') return false;
  try {
    return fs.statSync(path.join(root, 'compiled', '.built')).mtimeMs >= newestSource();
  } catch {
    return false;
  }
}

if (compiledIsFresh()) {
  await import('../compiled/cli/main.js');
} else {
  let register;
  try {
    ({ register } = await import('tsx/esm/api'));
  } catch (e) {
    if (e?.code !== 'ERR_MODULE_NOT_FOUND') throw e;
    // A staged tree (scripts/container-build.sh: the container image, tt-model's dist/rfdetr) ships compiled/ and
    // no tsx; a source edited there makes compiled/ stale.
    console.error(`rfdetr: compiled/ is missing or older than the TypeScript sources in ${root}, and tsx (which runs them) is not installed; rebuild with 'node scripts/build-cli.mjs' (needs typescript) or 'npm install tsx'`);
    process.exit(1);
  }
  register();
  await import('../cli/main.ts');
}
