import { linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** The lock file in SVC_DATA_DIR: it holds the pid of the one process that has the embedded database open. */
export const LOCK_FILE_NAME = 'svc.lock';

/** Another live process holds the directory: the message is the one line the second opener prints. */
export class DataDirInUseError extends Error {
  constructor(
    readonly dir: string,
    readonly pid: number,
  ) {
    super(`SVC_DATA_DIR ${dir} is in use by process ${pid} (the gateway, Studio or the migrate script); stop it first.`);
    this.name = 'DataDirInUseError';
  }
}

export interface DataDirLock {
  readonly file: string;
  /** Removes the lock file (when it is still ours); idempotent. */
  release(): void;
}

/** Lock files this process holds: a second open in the same process is refused as well. */
const held = new Set<string>();

function holderOf(file: string): number | null {
  try {
    const pid = Number.parseInt(readFileSync(file, 'utf8').trim(), 10);
    return Number.isSafeInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/** Whether a process with this pid exists (EPERM: it exists, under another user). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Creates the lock file with its content in one step: written under a unique name, then hard-linked to the lock's
 * name (fails with EEXIST when it exists), so that no reader ever sees an empty lock file. Where hard links are not
 * supported, an exclusive create (O_EXCL) and a write.
 */
function create(file: string): boolean {
  const content = `${process.pid}\n`;
  const temp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  try {
    writeFileSync(temp, content, { flag: 'wx' });
    try {
      linkSync(temp, file);
      return true;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EEXIST') return false;
      if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS') throw err;
    } finally {
      unlinkSync(temp);
    }
    writeFileSync(file, content, { flag: 'wx' });
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
}

/**
 * Takes the exclusive lock of an embedded database directory (`<dir>/svc.lock`, holding this process's pid), for the
 * gateway, Studio and the migrate script: PGlite is a directory that one process may open at a time. A lock left by
 * a process that is gone (a crash, kill -9) is taken over; one held by a live process throws DataDirInUseError. Released
 * by release() and, failing that, when this process exits.
 */
export function lockDataDir(dir: string): DataDirLock {
  const resolved = path.resolve(dir);
  mkdirSync(resolved, { recursive: true });
  const file = path.join(resolved, LOCK_FILE_NAME);
  if (held.has(file)) throw new DataDirInUseError(resolved, process.pid);
  for (let attempt = 0; ; attempt++) {
    if (create(file)) break;
    const pid = holderOf(file);
    // Our own pid here is a previous process's lock (a container restarted with the same pid): not held in this one.
    if (pid !== null && pid !== process.pid && alive(pid)) throw new DataDirInUseError(resolved, pid);
    if (attempt >= 3) throw new DataDirInUseError(resolved, pid ?? 0);
    // Stale: removed only if it still names the same holder (another starter may have taken it over meanwhile).
    if (holderOf(file) === pid) {
      try {
        unlinkSync(file);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
  }
  held.add(file);
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    held.delete(file);
    process.off('exit', release);
    try {
      if (holderOf(file) === process.pid) unlinkSync(file);
    } catch {
      // gone already
    }
  };
  process.on('exit', release);
  return { file, release };
}
