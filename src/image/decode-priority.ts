// The server's threads at a lower CPU priority than its sidecar's engine: the helper threads below the main
// thread (--decode-nice), then the main thread itself below the sidecars once they run (--server-nice). On a host whose
// engine computes on the same cores (the cpu engine's forward threads in the sidecar), the decodes of one
// client's huge images (sharp: libuv's pool and libvips's workers), the inflates of its compressed bodies and
// the writes of its 200 MB frames otherwise take a core from every other client's forward: under the red-team
// attack (bench/redteam) a legitimate client's forward took 0.89 s against 0.46 s on a quiet host. Linux's
// nice value is per thread (setpriority(PRIO_PROCESS, tid)) and a new thread starts with its creator's, so:
// every thread but the main one is reniced once, after libuv's pool exists; libvips's workers, created later
// by the pool's threads, start niced; the sidecar, spawned by the main thread, starts at the main thread's
// value. An unprivileged process can only raise a nice value: the threads go to the main thread's + `delta`
// (at most 19), and one already there or above is left as it is. Elsewhere (no /proc/self/task) nothing is
// changed and the result says why.
import fs from 'node:fs';
import os from 'node:os';

/** What lowerDecodePriority did, for /info and the start-up log. */
export interface DecodePriority {
  /** The requested increment (--decode-nice); 0 = off. */
  delta: number;
  /** The nice value the helper threads were given (the main thread's + delta, at most 19); null when nothing was done. */
  nice: number | null;
  /** Threads reniced now (threads created later by them inherit it). */
  threads: number;
  /** Why nothing (or not everything) was changed; absent when every helper thread got `nice`. */
  note?: string;
  /**
   * The kernel's autogroup scheduling is on (kernel.sched_autogroup_enabled = 1): outside a cpu cgroup (a
   * container's), the CPU is first shared evenly between sessions, and nice values order threads only within
   * one. The sidecar runs in the server's session (a process group of its own, for Ctrl-C), so the nice
   * values order its threads against the server's; other sessions on the host get their even shares.
   */
  autogroup?: true;
}

export const DEFAULT_DECODE_NICE = 10;

/**
 * The checks both functions make first: `delta` an integer 0–19 (else a RangeError naming `flag` and the value);
 * then why nothing is to be done (0: off; not Linux: `elsewhere` says what happens there), or null.
 */
function nothingToDo(delta: number, flag: '--decode-nice' | '--server-nice', elsewhere: string): string | null {
  if (!Number.isInteger(delta) || delta < 0 || delta > 19) {
    throw new RangeError(`Expected an integer 0–19 for the ${flag.slice(2).replace('-', ' ')} increment but received ${delta}`);
  }
  if (delta === 0) return `off (${flag} 0)`;
  if (process.platform !== 'linux') return `per-thread priorities are Linux-only; on ${process.platform} ${elsewhere}`;
  return null;
}

/** The thread ids of this process (Linux: /proc/self/task), or an Error saying why they cannot be listed. */
function threadIds(): number[] | Error {
  try {
    return fs.readdirSync('/proc/self/task').map(Number).filter(Number.isInteger);
  } catch (e) {
    return new Error(`the threads of this process cannot be listed (${(e as Error).message}): per-thread priorities need Linux's /proc/self/task`);
  }
}

/**
 * Gives every thread of this process but the main one the main thread's nice + `delta` (at most 19). Call it
 * from the main thread, before the first decode and before any worker thread is started.
 */
export async function lowerDecodePriority(delta: number): Promise<DecodePriority> {
  const skip = nothingToDo(delta, '--decode-nice', 'every thread keeps the process\'s');
  if (skip) return { delta, nice: null, threads: 0, note: skip };
  // libuv starts its pool (all UV_THREADPOOL_SIZE threads at once) on its first job: make sure it exists, so that
  // it is reniced here rather than created later by the main thread at the main thread's priority.
  await fs.promises.stat('/proc/self/task').catch(() => undefined);
  const tids = threadIds();
  if (tids instanceof Error) return { delta, nice: null, threads: 0, note: tids.message };
  const main = process.pid;
  const nice = Math.min(19, os.getPriority(0) + delta);
  let threads = 0;
  const failed: string[] = [];
  for (const tid of tids) {
    if (tid === main) continue;
    try {
      if (os.getPriority(tid) >= nice) continue;
      os.setPriority(tid, nice);
      threads++;
    } catch (e) {
      // A thread that ended between the listing and now is no failure.
      if ((e as NodeJS.ErrnoException).code !== 'ESRCH' && !/ESRCH|no such process/i.test((e as Error).message)) failed.push(`${tid}: ${(e as Error).message}`);
    }
  }
  return {
    delta, nice, threads,
    ...(failed.length ? { note: `${failed.length} thread(s) kept their priority (${failed.slice(0, 3).join('; ')})` } : {}),
    ...(autogroupOn() ? { autogroup: true as const } : {}),
  };
}

function autogroupOn(): boolean {
  try {
    return fs.readFileSync('/proc/sys/kernel/sched_autogroup_enabled', 'utf8').trim() === '1';
  } catch {
    return false;
  }
}

/** What lowerMainPriority did, for /info and the start-up log. */
export interface MainPriority {
  /** The requested increment (--server-nice); 0 = off. */
  delta: number;
  /** The main thread's nice value now; null when nothing was done. */
  nice: number | null;
  /** Why nothing was changed; absent when the main thread got `nice`. */
  note?: string;
}

export const DEFAULT_SERVER_NICE = 5;

/**
 * Gives the calling (main) thread its nice + `delta` (at most 19): Linux's setpriority(PRIO_PROCESS, 0) is per
 * thread. Call it once the sidecars run: a process this thread starts afterwards (a restarted or swapped-in
 * sidecar, ffmpeg) inherits the value, and an unprivileged process cannot lower it again. Under the red-team
 * attack (bench/redteam, unprivileged, quiet Zen 4) the main thread at 0 took a third of the CPU from the
 * engine's two forward threads (forward 0.97 s against 0.49 s alone; the legitimate client's p50 10.9 s); at
 * +5, 0.73 s and p50 4.0 s.
 */
export function lowerMainPriority(delta: number): MainPriority {
  const skip = nothingToDo(delta, '--server-nice', 'the main thread\'s priority would be the whole process\'s');
  if (skip) return { delta, nice: null, note: skip };
  const nice = Math.min(19, os.getPriority(0) + delta);
  try {
    os.setPriority(0, nice);
  } catch (e) {
    return { delta, nice: null, note: `setpriority(${nice}): ${(e as Error).message}` };
  }
  return { delta, nice: os.getPriority(0) };
}
