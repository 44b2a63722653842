import { readFileSync } from 'node:fs';

/**
 * A V8 .cpuprofile (node --cpu-prof) summarized by where its samples' own time went: a package under node_modules,
 * Node's internals, the garbage collector, V8's native code, or this repository's files. Weighted by sample count,
 * not by time delta: on this VM wall-time weighting inflates samples that sit in a socket write.
 */
export interface ProfileSummary {
  /** Samples taken while the process was busy (idle samples left out), within the window asked for. */
  busySamples: number;
  /**
   * Share of busy samples by package, highest first (0..1): a sample in Node's internals or a V8 builtin (a socket
   * write, JSON.parse, a promise reaction) counts for the nearest caller that is a package or this repository's code;
   * GC and unattributed native time stay apart.
   */
  byPackage: { name: string; share: number }[];
  /** The same by the frame that was running (self time), Node's internals and V8's builtins apart. */
  bySelf: { name: string; share: number }[];
  /** This repository's files, highest first (share of busy samples). */
  ownFiles: { file: string; share: number }[];
  /**
   * The functions the samples count for (as byPackage counts them: a sample in Node's internals or a V8 builtin goes
   * to its nearest caller in a package or this repository), highest first, the top 15: `package function (file:line)`.
   */
  topFrames: { name: string; share: number }[];
}

interface Node {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}

export function packageOf(url: string, functionName: string): string | null {
  if (url === '') {
    if (functionName === '(idle)') return null;
    if (functionName === '(garbage collector)') return 'GC';
    if (functionName === '(program)') return 'V8/Node native (program)';
    return 'V8 builtins';
  }
  if (url.startsWith('node:')) return 'node internals';
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + '/node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (/\/(dist\/server|src)\//.test(url)) return 'svc (own code)';
  return 'other';
}

/** `fromMs`/`toMs`: only the samples taken that long after the profile started (the load, not start-up). */
export function summarizeProfile(file: string, root: string, window: { fromMs?: number; toMs?: number } = {}): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as { nodes: Node[]; samples: number[]; timeDeltas: number[] };
  const byId = new Map<number, Node>(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const counts = new Map<number, number>();
  const from = (window.fromMs ?? 0) * 1000;
  const to = (window.toMs ?? Infinity) * 1000;
  let t = 0;
  profile.samples.forEach((id, i) => {
    t += profile.timeDeltas[i] ?? 0;
    if (t >= from && t <= to) counts.set(id, (counts.get(id) ?? 0) + 1);
  });
  const attributed = new Map<number, string>();
  /** The package a sample counts for: its own frame's, else its nearest caller's that is a package or own code. */
  const owner = (id: number): string => {
    const known = attributed.get(id);
    if (known) return known;
    const frame = byId.get(id)!.callFrame;
    const pkg = packageOf(frame.url, frame.functionName)!;
    let result = pkg;
    if (pkg === 'node internals' || pkg === 'V8 builtins') {
      const up = parent.get(id);
      const above = up === undefined ? null : owner(up);
      if (above && above !== '(root)' && above !== 'V8/Node native (program)') result = above;
    }
    if (frame.functionName === '(root)') result = '(root)';
    attributed.set(id, result);
    return result;
  };
  /** The frame a sample counts for: its own, else its nearest caller's that is in a package or own code. */
  const ownerFrame = (id: number): number => {
    const frame = byId.get(id)!.callFrame;
    const pkg = packageOf(frame.url, frame.functionName);
    if (pkg !== 'node internals' && pkg !== 'V8 builtins') return id;
    const up = parent.get(id);
    return up === undefined || byId.get(up)!.callFrame.functionName === '(root)' ? id : ownerFrame(up);
  };
  const frames = new Map<string, number>();
  const packages = new Map<string, number>();
  const self = new Map<string, number>();
  const own = new Map<string, number>();
  let busy = 0;
  for (const [id, n] of counts) {
    const frame = byId.get(id)!.callFrame;
    const pkg = packageOf(frame.url, frame.functionName);
    if (pkg === null) continue;
    busy += n;
    self.set(pkg, (self.get(pkg) ?? 0) + n);
    const by = owner(id);
    packages.set(by, (packages.get(by) ?? 0) + n);
    const f = byId.get(ownerFrame(id))!.callFrame as Node['callFrame'] & { lineNumber?: number };
    const file = f.url.includes('/node_modules/') ? f.url.slice(f.url.lastIndexOf('/node_modules/') + 14) : f.url.replace(/^file:\/\//, '').replace(`${root}/`, '');
    const frameName = `${by} ${f.functionName || '(anonymous)'}${file ? ` (${file}:${(f.lineNumber ?? 0) + 1})` : ''}`;
    frames.set(frameName, (frames.get(frameName) ?? 0) + n);
    if (pkg === 'svc (own code)') {
      const rel = frame.url.replace(/^file:\/\//, '').replace(`${root}/`, '');
      own.set(rel, (own.get(rel) ?? 0) + n);
    }
  }
  const share = (n: number) => Math.round((n / Math.max(1, busy)) * 1000) / 1000;
  const sorted = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]).map(([name, n]) => ({ name, share: share(n) }));
  return {
    busySamples: busy,
    byPackage: sorted(packages),
    bySelf: sorted(self),
    ownFiles: [...own].sort((a, b) => b[1] - a[1]).slice(0, 10).map(([file, n]) => ({ file, share: share(n) })),
    topFrames: sorted(frames).slice(0, 15),
  };
}

// `node --import tsx bench/profile.ts <file.cpuprofile> [fromMs] [toMs]`: the summary of one profile.
if (process.argv[1] && /(^|\/)profile\.ts$/.test(process.argv[1]) && process.argv[2]) {
  const s = summarizeProfile(process.argv[2], process.cwd(), { fromMs: Number(process.argv[3] ?? 0), toMs: Number(process.argv[4] ?? Infinity) });
  process.stdout.write(`${s.busySamples} busy samples\n`);
  for (const p of s.byPackage.slice(0, 20)) process.stdout.write(`${(p.share * 100).toFixed(1).padStart(5)}%  ${p.name}\n`);
  process.stdout.write('self:\n');
  for (const p of s.bySelf.slice(0, 20)) process.stdout.write(`${(p.share * 100).toFixed(1).padStart(5)}%  ${p.name}\n`);
  process.stdout.write('own files:\n');
  for (const f of s.ownFiles) process.stdout.write(`${(f.share * 100).toFixed(1).padStart(5)}%  ${f.file}\n`);
}
