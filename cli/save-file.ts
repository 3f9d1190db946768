// Writing an output file into a directory the user named (detect --save DIR) without following what is already
// there: the bytes go to a new temporary file in DIR (O_EXCL, so not through a planted symlink), and a rename
// puts it in place. rename(2) replaces a directory entry and never follows a symlink at the destination, so a
// link in DIR can at worst be replaced, never written through. An existing entry is replaced only when it is a
// regular file owned by this user; anything else (a symlink, a directory, someone else's file) is refused.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/** The destination exists and is not ours to replace. */
export class RefusedOverwrite extends Error {
  override name = 'RefusedOverwrite';
}

function describe(st: fs.Stats): string {
  if (st.isSymbolicLink()) return 'a symbolic link';
  if (st.isDirectory()) return 'a directory';
  if (!st.isFile()) return 'not a regular file';
  return `a file owned by uid ${st.uid}, not by this user (uid ${process.getuid?.()})`;
}

/** Why `target` may not be replaced, or null when it is absent or a regular file of ours. */
function refusal(target: string): string | null {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(target);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
  const mine = process.getuid === undefined || st.uid === process.getuid();
  if (st.isFile() && mine) return null;
  return describe(st);
}

/** Writes `bytes` as `dir/name` via a temporary file and a rename; throws RefusedOverwrite for an entry not ours. */
export function writeFileInDir(dir: string, name: string, bytes: Uint8Array): string {
  if (name !== path.basename(name) || name === '' || name === '.' || name === '..') {
    throw new Error(`writeFileInDir: ${JSON.stringify(name)} is not a plain file name`);
  }
  const target = path.join(dir, name);
  const why = refusal(target);
  if (why) throw new RefusedOverwrite(`${target} is ${why}; refusing to replace it (remove it or choose another directory)`);
  const tmp = path.join(dir, `.${name}.${process.pid}.${crypto.randomBytes(6).toString('hex')}.tmp`);
  const fd = fs.openSync(tmp, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, 0o644);
  try {
    try {
      fs.writeSync(fd, bytes);
    } finally {
      fs.closeSync(fd);
    }
    // Checked again just before the rename: the entry may have appeared meanwhile.
    const late = refusal(target);
    if (late) throw new RefusedOverwrite(`${target} is ${late}; refusing to replace it (remove it or choose another directory)`);
    fs.renameSync(tmp, target);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw e;
  }
  return target;
}

/** Why an existing `target` may not be replaced (a link, a directory, not ours), or null when it may. */
export function refusalToReplace(target: string): string | null {
  return refusal(target);
}
