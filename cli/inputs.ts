// `rfdetr detect` inputs → the ordered list of images to run: files as given, directories (their image files;
// with `recursive`, also below), globs (`*`, `?`, `[...]`, `**`, matched by tinyglobby, for patterns the shell
// did not expand, e.g. quoted), http(s):// URLs, and `-` for stdin. Every input that names nothing is collected
// and reported at once, before any engine starts: a typo should not cost a model load.
import fs from 'node:fs';
import path from 'node:path';
import { globSync } from 'tinyglobby';
import { isLiveSource, VIDEO_EXTENSIONS } from './media-kind.ts';

/** Extensions picked from directories and globs (a file named explicitly is tried whatever its name). */
export const IMAGE_EXTENSIONS = new Set(['.png', '.jpg', '.jpeg', '.webp', '.gif', '.tif', '.tiff']);

export interface ImageInput {
  /** As shown in output and the JSON "image" field: the path as given or found, or "-" for stdin. */
  name: string;
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

function listDir(dir: string, shown: string, recursive: boolean, out: ImageInput[]): void {
  const entries = fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const e of entries) {
    const abs = path.join(dir, e.name);
    const name = path.join(shown, e.name);
    const st = e.isSymbolicLink() ? statOrNull(abs) : null;
    const isDir = e.isDirectory() || (st?.isDirectory() ?? false);
    const isFile = e.isFile() || (st?.isFile() ?? false);
    if (isDir) {
      if (recursive) listDir(abs, name, recursive, out);
    } else if (isFile && isImageName(e.name)) {
      out.push({ name, path: abs });
    }
  }
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
  for (const input of inputs) {
    if (input === '-') {
      if (stdinSeen) problems.push("'-' (stdin) was given more than once; it can be read only once");
      stdinSeen = true;
      images.push({ name: '-', path: null });
      continue;
    }
    if (isLiveSource(input)) {
      images.push({ name: input, path: null, live: input });
      continue;
    }
    if (/^https?:\/\//i.test(input)) {
      images.push({ name: input, path: null, url: input });
      continue;
    }
    const abs = path.resolve(opts.cwd, input);
    const st = statOrNull(abs);
    if (st?.isFile()) {
      images.push({ name: input, path: abs });
    } else if (st?.isDirectory()) {
      const before = images.length;
      try {
        listDir(abs, input, opts.recursive, images);
      } catch (e) {
        problems.push(`${input}: cannot read the directory (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
        continue;
      }
      if (images.length === before) {
        problems.push(`${input}: the directory holds no image files (${[...IMAGE_EXTENSIONS].join(' ')})${opts.recursive ? '' : '; add --recursive to look in subdirectories'}`);
      }
    } else if (st) {
      problems.push(`${input}: not a regular file or directory`);
    } else if (GLOB_CHARS.test(input)) {
      const matches = expandGlob(input, opts.cwd);
      if (matches.length === 0) problems.push(`${input}: the pattern matches no image files`);
      for (const m of matches) images.push({ name: m, path: path.resolve(opts.cwd, m) });
    } else {
      problems.push(`${input}: no such file or directory`);
    }
  }
  return { images, problems };
}
