// What a recorded response keeps and what it masks: the response text itself, byte for byte, except values that
// differ run to run (every number inside a `timing_ms` object) and values too large to commit (a `raw` head
// output, an annotated image's `base64`), each replaced in place by a stand-in. Only VALUES are replaced: the
// key order, the spacing and every other byte stay as the server wrote them, since they are the contract.

import { createHash } from 'node:crypto';

/** Keys whose value is replaced by "sha256:<hex of the value's exact text>". */
const HASHED_KEYS = ['raw', 'base64'];

/** The index just past the JSON value that starts at `i` in `text` (a string, number, literal, array or object). */
export function valueEnd(text: string, i: number): number {
  const c = text[i];
  if (c === '"') {
    let j = i + 1;
    while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
    return j + 1;
  }
  if (c === '{' || c === '[') {
    let depth = 0;
    for (let j = i; j < text.length; j++) {
      const d = text[j];
      if (d === '"') j = valueEnd(text, j) - 1;
      else if (d === '{' || d === '[') depth++;
      else if (d === '}' || d === ']') {
        depth--;
        if (depth === 0) return j + 1;
      }
    }
    throw new Error(`unterminated JSON value at offset ${i}`);
  }
  const m = /^-?[0-9.eE+-]+|^true|^false|^null/.exec(text.slice(i, i + 40));
  if (!m) throw new Error(`no JSON value at offset ${i}: ${JSON.stringify(text.slice(i, i + 20))}`);
  return i + m[0].length;
}

function replaceValuesOf(text: string, key: string, replace: (value: string) => string): string {
  const needle = `"${key}":`;
  let out = '';
  let from = 0;
  for (;;) {
    const k = text.indexOf(needle, from);
    if (k < 0) return out + text.slice(from);
    let v = k + needle.length;
    while (text[v] === ' ') v++;
    const end = valueEnd(text, v);
    out += text.slice(from, v) + replace(text.slice(v, end));
    from = end;
  }
}

/** `text` (a JSON response body or a `detect --json` line) with its run-dependent and bulky values masked. */
export function maskResponse(text: string): string {
  let out = replaceValuesOf(text, 'timing_ms', (obj) => obj.replace(/("[^"]+":\s*)-?[0-9][0-9.eE+-]*/g, '$1"<ms>"'));
  for (const key of HASHED_KEYS) out = replaceValuesOf(out, key, (v) => `"sha256:${createHash('sha256').update(v).digest('hex')}"`);
  return out;
}
