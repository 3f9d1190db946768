// `rfdetr detect` inputs → the ordered list of images to run: files as given, directories (their image files;
// with `recursive`, also below), globs (`*`, `?`, `[...]`, `**`, matched by tinyglobby, for patterns the shell
// did not expand, e.g. quoted), http(s):// URLs, and `-` for stdin. Every input that names nothing is collected
// and reported at once, before any engine starts: a typo should not cost a model load. Directory walks visit
// each directory and each file once (by device and inode), so symlink loops end; file bytes are read only after
// a size check, stdin only up to the image limit; names printed to a terminal have their control characters
// escaped (a file name can carry ANSI sequences or newlines).
import { Readable } from 'node:stream';
import fs from 'node:fs';
import path from 'node:path';
import { globSync } from 'tinyglobby';
import { isLiveSource, VIDEO_EXTENSIONS } from './media-kind.ts';
import { MAX_IMAGE_BYTES } from '../src/image/limits.ts';

/** Extensions picked from directories and globs (a file named explicitly is tried whatever its name). */
export const IMAGE_EXTENSIONS = new Set(['.png', '.jpg', '.jpeg', '.webp', '.gif', '.tif', '.tiff']);

export interface ImageInput {
  /** The JSON "image" field: the path as given or found, or "-" for stdin. */
  name: string;
  /** `name` as printed on a terminal (escapeForTerminal). */
  shown: string;
  /** Absolute path; null for stdin or a URL. */
  path: string | null;
  /** An http(s):// input, fetched when its turn comes. */
  url?: string;
  /** A live source (stream address or camera device), decoded by ffmpeg. */
  live?: string;
}

export interface ExpandResult {
  images: ImageInput[];
  /** One message per input that named nothing usable. */
  problems: string[];
}

const GLOB_CHARS = /[*?[]/;

function isImageName(p: string): boolean {
  const ext = path.extname(p).toLowerCase();
  return IMAGE_EXTENSIONS.has(ext) || VIDEO_EXTENSIONS.has(ext);
}

function statOrNull(p: string): fs.Stats | null {
  try {
    return fs.statSync(p);
  } catch {
    return null;
  }
}

/**
 * `s` with what a terminal would act on made visible: C0/C1 controls and DEL as \xNN, Unicode line separators
 * and bidirectional overrides as \u{…} (a name could otherwise rewrite the screen or reorder what it shows).
 */
export function escapeForTerminal(s: string): string {
  // eslint-disable-next-line no-control-regex
  return s.replace(/[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, (c) => {
    const n = c.codePointAt(0)!;
    return n <= 0xff ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u{${n.toString(16)}}`;
  });
}

function input(name: string, abs: string | null, url?: string): ImageInput {
  return url === undefined ? { name, shown: escapeForTerminal(name), path: abs } : { name, shown: escapeForTerminal(name), path: abs, url };
}

const idOf = (st: fs.Stats) => `${st.dev}:${st.ino}`;

/** Appends the image files under `dir`; `seen` holds the directories and files already visited (dev:ino). */
function listDir(dir: string, shown: string, recursive: boolean, out: ImageInput[], seen: Set<string>): void {
  const entries = fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const e of entries) {
    const abs = path.join(dir, e.name);
    const name = path.join(shown, e.name);
    const st = e.isSymbolicLink() || e.isDirectory() || (e.isFile() && isImageName(e.name)) ? statOrNull(abs) : null;
    if (!st) continue;
    if (st.isDirectory()) {
      if (!recursive || seen.has(idOf(st))) continue;
      seen.add(idOf(st));
      listDir(abs, name, recursive, out, seen);
    } else if (st.isFile() && isImageName(e.name) && !seen.has(idOf(st))) {
      seen.add(idOf(st));
      out.push(input(name, abs));
    }
  }
}

function tooLargeMessage(what: string, bytes: number | null): string {
  const size = bytes === null ? `more than ${MAX_IMAGE_BYTES} bytes` : `${bytes} bytes`;
  return `${what} is ${size}; the limit is ${MAX_IMAGE_BYTES} bytes (${MAX_IMAGE_BYTES / 2 ** 20} MiB) per image: expected one image file`;
}

/** A file's bytes, its size checked before a byte is read (a 2 GB file is refused without reading it). */
export function readImageFile(file: string, max = MAX_IMAGE_BYTES): Buffer {
  const fd = fs.openSync(file, 'r');
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw Object.assign(new Error('not a regular file'), { code: 'ENOTFILE' });
    if (st.size > max) throw Object.assign(new Error(tooLargeMessage('the file', st.size)), { code: 'E_IMAGE_TOO_LARGE' });
    // Read at most max + 1 bytes whatever the size said (a file that grows while read).
    const buf = Buffer.alloc(Math.min(st.size, max) + 1);
    let n = 0;
    for (let r; n < buf.length && (r = fs.readSync(fd, buf, n, buf.length - n, null)) > 0;) n += r;
    if (n > max) throw Object.assign(new Error(tooLargeMessage('the file', null)), { code: 'E_IMAGE_TOO_LARGE' });
    return buf.subarray(0, n);
  } finally {
    fs.closeSync(fd);
  }
}

/** Everything `stream` carries, up to `max` bytes; more is an error at once (`rfdetr detect - < /dev/zero`). */
export async function readStreamCapped(stream: AsyncIterable<Buffer | string>, max = MAX_IMAGE_BYTES): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of stream) {
    const b = typeof c === 'string' ? Buffer.from(c) : c;
    n += b.length;
    if (n > max) throw Object.assign(new Error(tooLargeMessage('stdin', null)), { code: 'E_IMAGE_TOO_LARGE' });
    chunks.push(b);
  }
  return Buffer.concat(chunks, n);
}

/**
 * The first `n` bytes of a stream (fewer if it ends first) and the whole stream again, those bytes included,
 * for reading on: a pipe can be told apart by its first bytes without reading it to the end.
 */
export async function peekStream(stream: AsyncIterable<Buffer | string>, n = 512): Promise<{ head: Buffer; whole: Readable }> {
  const it = stream[Symbol.asyncIterator]();
  const seen: Buffer[] = [];
  let got = 0;
  let ended = false;
  while (got < n) {
    const r = await it.next();
    if (r.done) {
      ended = true;
      break;
    }
    const b = typeof r.value === 'string' ? Buffer.from(r.value) : r.value;
    seen.push(b);
    got += b.length;
  }
  const head = Buffer.concat(seen, got);
  async function* rest(): AsyncGenerator<Buffer> {
    if (head.length) yield head;
    if (ended) return;
    for (;;) {
      const r = await it.next();
      if (r.done) return;
      yield typeof r.value === 'string' ? Buffer.from(r.value) : r.value;
    }
  }
  return { head: head.subarray(0, n), whole: Readable.from(rest(), { objectMode: false }) };
}

/** Files matching `pattern` (relative to cwd or absolute), sorted; only image files unless the last segment has an extension. */
export function expandGlob(pattern: string, cwd: string): string[] {
  const abs = path.isAbsolute(pattern);
  // expandDirectories off: a pattern naming a directory is not a glob of its contents (directories are
  // handled by listDir, with --recursive); dot files only where the pattern itself starts with a dot.
  const found = globSync(pattern, { cwd, absolute: abs, dot: false, onlyFiles: true, expandDirectories: false });
  const last = pattern.split('/').pop() ?? '';
  const anyExt = /\.[A-Za-z0-9]+$/.test(last);
  return found.filter((f) => anyExt || isImageName(f)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

export function expandInputs(inputs: readonly string[], opts: { cwd: string; recursive: boolean }): ExpandResult {
  const images: ImageInput[] = [];
  const problems: string[] = [];
  let stdinSeen = false;
  for (const arg of inputs) {
    if (arg === '-') {
      if (stdinSeen) problems.push("'-' (stdin) was given more than once; it can be read only once");
      stdinSeen = true;
      images.push(input('-', null));
      continue;
    }
    if (isLiveSource(arg)) {
      images.push({ ...input(arg, null), live: arg });
      continue;
    }
    if (/^https?:\/\//i.test(arg)) {
      images.push(input(arg, null, arg));
      continue;
    }
    const shown = escapeForTerminal(arg);
    const abs = path.resolve(opts.cwd, arg);
    const st = statOrNull(abs);
    if (st?.isFile()) {
      images.push(input(arg, abs));
    } else if (st?.isDirectory()) {
      const before = images.length;
      try {
        listDir(abs, arg, opts.recursive, images, new Set([idOf(st)]));
      } catch (e) {
        problems.push(`${shown}: cannot read the directory (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
        continue;
      }
      if (images.length === before) {
        problems.push(`${shown}: the directory holds no image files (${[...IMAGE_EXTENSIONS].join(' ')})${opts.recursive ? '' : '; add --recursive to look in subdirectories'}`);
      }
    } else if (st) {
      problems.push(`${shown}: not a regular file or directory`);
    } else if (GLOB_CHARS.test(arg)) {
      const matches = expandGlob(arg, opts.cwd);
      if (matches.length === 0) problems.push(`${shown}: the pattern matches no image files`);
      for (const m of matches) images.push(input(m, path.resolve(opts.cwd, m)));
    } else {
      problems.push(`${shown}: no such file or directory`);
    }
  }
  return { images, problems };
}
