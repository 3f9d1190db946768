// What Linux's /proc says of a process's threads and children, for the tests of nice values and autogroups:
// the kernel's own record, read rather than asked of the process under test.
//
//   threadsOf(pid)        every thread: id, name (comm) and nice value (/proc/PID/task/*/stat)
//   childrenOf(pid)       pid's child processes (/proc/PID/task/*/children)
//   sidecarChildOf(pid)   the rfdetr-sidecar among them, or undefined
//   autogroupOn()         kernel.sched_autogroup_enabled is 1
import fs from 'node:fs';

export interface ThreadNice { tid: number; comm: string; nice: number }

/** Every thread of `pid` with its name and nice value; a thread that ends during the listing is left out. */
export function threadsOf(pid: number): ThreadNice[] {
  return fs.readdirSync(`/proc/${pid}/task`).flatMap((tid) => {
    try {
      const st = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      // pid (comm) state ppid ...: the fields after the name, where nice is the 17th.
      const fields = st.slice(st.lastIndexOf(')') + 2).split(' ');
      return [{ tid: Number(tid), comm: st.slice(st.indexOf('(') + 1, st.lastIndexOf(')')), nice: Number(fields[16]) }];
    } catch {
      return []; // ended between the listing and the read
    }
  });
}

/** The processes whose parent is `pid` (every thread's children: node spawns from its main thread). */
export function childrenOf(pid: number): number[] {
  const out = new Set<number>();
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    let children = '';
    try {
      children = fs.readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8');
    } catch {
      continue; // the thread ended since the listing
    }
    for (const c of children.trim().split(/\s+/)) if (c) out.add(Number(c));
  }
  return [...out];
}

/** The rfdetr-sidecar among `parent`'s children, or undefined. */
export function sidecarChildOf(parent: number): number | undefined {
  return childrenOf(parent).find((k) => {
    try {
      return fs.readFileSync(`/proc/${k}/comm`, 'utf8').trim() === 'rfdetr-sidecar';
    } catch {
      return false; // ended since the listing
    }
  });
}

/** The kernel's autogroup scheduling is on (kernel.sched_autogroup_enabled = 1). */
export function autogroupOn(): boolean {
  try {
    return fs.readFileSync('/proc/sys/kernel/sched_autogroup_enabled', 'utf8').trim() === '1';
  } catch {
    return false;
  }
}
