// The CPU time a child process (every thread of it) has used so far, read from Linux's /proc/<pid>/stat: how
// the video route charges ffmpeg's decoding to the client whose video it is (the engine's fair share).
import fs from 'node:fs';

/** /proc reports CPU times in USER_HZ ticks, 100 per second on every Linux ABI. */
const MS_PER_TICK = 10;

/** utime + stime, in ms, from the text of a /proc/<pid>/stat file; null if it is not one. */
export function statCpuMs(stat: string): number | null {
  // The command name (field 2) is in parentheses and may hold spaces or ')': the fields after the last ')' are fixed.
  const close = stat.lastIndexOf(')');
  if (close < 0) return null;
  const f = stat.slice(close + 2).split(' ');
  // f[0] is field 3 (state): utime and stime are fields 14 and 15.
  const utime = Number(f[11]);
  const stime = Number(f[12]);
  return Number.isFinite(utime) && Number.isFinite(stime) ? (utime + stime) * MS_PER_TICK : null;
}

/** `pid`'s CPU time so far in ms; null where it cannot be read (not Linux, the process gone and reaped). */
export function processCpuMs(pid: number | undefined): number | null {
  if (pid === undefined || process.platform !== 'linux') return null;
  try {
    return statCpuMs(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return null;
  }
}
