// src/http/index.ts names every module of src/http with its job, and names nothing that is not there: a new
// module joins the map, a removed one leaves it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../src/config/paths.ts';

test('src/http/index.ts: its module map names exactly the files of src/http, each with a job', () => {
  const dir = path.join(packageRoot, 'src', 'http');
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.ts')).sort();
  const index = fs.readFileSync(path.join(dir, 'index.ts'), 'utf8');
  const named = [...index.matchAll(/^\/\/ {3}([a-z-]+\.ts) +(\S.*)$/gm)].map((m) => m[1]!);
  assert.deepEqual([...named].sort(), files, 'the map in src/http/index.ts and the files of src/http differ');
  assert.equal(new Set(named).size, named.length, 'a module is named twice');
});
