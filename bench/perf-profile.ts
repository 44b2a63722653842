import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { packageOf } from './profile.ts';

/**
 * An on-CPU profile of one process with Linux perf (`perf record -e cpu-clock -g`), every thread included, summarized
 * by where its samples went. V8's --cpu-prof samples the main thread on a wall-clock timer: a sample that lands while
 * the thread waits for a core inside a socket write counts as the write, and the GC's helper threads are not in it.
 * perf's cpu-clock samples only what runs on a CPU, in every thread, so its shares add up to the process's CPU time,
 * which is what cpu_ratio divides. JavaScript frames are named through the process's /tmp/perf-<pid>.map, written when
 * it runs with --perf-basic-prof.
 */
export interface PerfSummary {
  samples: number;
  /** Share of all samples taken in threads other than the main one (V8's GC and compiler helpers, libuv's pool). */
  otherThreads: number;
  /**
   * Share of all samples by owner: "GC" (any thread, a sample with a V8 collector frame on its stack), "kernel" (the
   * main thread in the kernel: system calls, the network stack), else the nearest JavaScript frame's package or this
   * repository's code; "node internals (no JS caller)" for the main thread in Node's C++ with no such frame (the HTTP
   * parser's callbacks, the event loop), "other threads" for what is left on the helpers.
   */
  byOwner: { name: string; share: number }[];
  ownFiles: { file: string; share: number }[];
}

const GC_FRAME = /Scaveng|MarkCompact|ConcurrentMarking|MarkingVisitor|Sweeper|Heap::Collect|IncrementalMarking|MinorMark|GCTracer|MemoryReducer/;

export function perfAvailable(): boolean {
  try {
    execFileSync('perf', ['record', '-e', 'cpu-clock', '-o', '/dev/null', '--', 'true'], { stdio: 'ignore', timeout: 10_000 });
    return true;
  } catch {
    return false;
  }
}

/** Starts recording `pid`; stop() ends it (SIGINT, as perf expects) and resolves once the data file is written. */
export function recordPerf(pid: number, file: string, hz = 999): { stop: () => Promise<void> } {
  const child: ChildProcess = spawn('perf', ['record', '-e', 'cpu-clock', '-F', String(hz), '-g', '-p', String(pid), '-o', file], { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    stop: async () => {
      child.kill('SIGINT');
      await exited;
    },
  };
}

export function summarizePerf(file: string, root: string): PerfSummary {
  const text = execFileSync('perf', ['script', '-i', file, '-F', 'tid,ip,sym,dso'], { maxBuffer: 1 << 30, stdio: ['ignore', 'pipe', 'ignore'] }).toString();
  const samples: { tid: string; frames: string[] }[] = [];
  const perTid = new Map<string, number>();
  for (const block of text.split('\n\n')) {
    const lines = block.split('\n').filter((l) => l.trim() !== '');
    if (lines.length === 0) continue;
    const tid = lines[0]!.trim().split(/\s+/)[0]!;
    perTid.set(tid, (perTid.get(tid) ?? 0) + 1);
    samples.push({ tid, frames: lines.slice(1).map((l) => l.trim().replace(/^[0-9a-f]+ /, '')) });
  }
  const main = [...perTid].sort((a, b) => b[1] - a[1])[0]?.[0];
  const owners = new Map<string, number>();
  const own = new Map<string, number>();
  const add = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);
  for (const { tid, frames } of samples) {
    if (frames.some((f) => GC_FRAME.test(f))) {
      add(owners, 'GC');
      continue;
    }
    if (tid !== main) {
      add(owners, 'other threads');
      continue;
    }
    if (frames[0]?.includes('[kernel.kallsyms]')) {
      add(owners, 'kernel');
      continue;
    }
    let owner: string | null = null;
    for (const f of frames) {
      // "JS:*name file:///…/x.js:12:3 (/tmp/perf-<pid>.map)": Node's own modules (node:…) are walked past.
      const url = /^JS:\S*\s+(?:\S+\s+)?((?:file:\/\/|\/)\S+?):\d+:\d+/.exec(f)?.[1];
      if (!url) continue;
      const pkg = packageOf(url, '');
      if (pkg === null || pkg === 'node internals' || pkg === 'other') continue;
      owner = pkg;
      if (pkg === 'svc (own code)') add(own, url.replace(/^file:\/\//, '').replace(`${root}/`, ''));
      break;
    }
    add(owners, owner ?? 'node internals (no JS caller)');
  }
  const total = Math.max(1, samples.length);
  const share = (n: number) => Math.round((n / total) * 1000) / 1000;
  return {
    samples: samples.length,
    otherThreads: share(samples.length - (main ? perTid.get(main)! : 0)),
    byOwner: [...owners].sort((a, b) => b[1] - a[1]).map(([name, n]) => ({ name, share: share(n) })),
    ownFiles: [...own].sort((a, b) => b[1] - a[1]).slice(0, 10).map(([file, n]) => ({ file, share: share(n) })),
  };
}

// `node --import tsx bench/perf-profile.ts <perf.data>`: the summary of one recording.
if (process.argv[1]?.endsWith('perf-profile.ts') && process.argv[2]) {
  const s = summarizePerf(process.argv[2], process.cwd());
  process.stdout.write(`${s.samples} samples, ${(s.otherThreads * 100).toFixed(1)}% outside the main thread\n`);
  for (const p of s.byOwner.slice(0, 20)) process.stdout.write(`${(p.share * 100).toFixed(1).padStart(5)}%  ${p.name}\n`);
  process.stdout.write('own files:\n');
  for (const f of s.ownFiles) process.stdout.write(`${(f.share * 100).toFixed(1).padStart(5)}%  ${f.file}\n`);
}
