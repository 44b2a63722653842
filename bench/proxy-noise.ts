/**
 * `node --import tsx bench/proxy-noise.ts`: the bare proxy (bench/baseline-proxy.ts) in front of the mock provider,
 * driven at saturation three times in each of three process lifetimes, with its CPU per request from /proc. With the
 * same code it moved between ~100 and ~200 µs per request on this shared VM, within one process's life too: why the
 * bench's headline cpu_ratio is the median of paired rounds (bench/run.ts BENCH_ROUNDS), not one window of each.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';
import { freePort } from './gateway.ts';

/** utime + stime of a process, in 1/100 s. */
function ticks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

function start(args: string[], env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve) => child.stdout!.on('data', (d: Buffer) => d.toString().includes('LISTENING') && resolve(child)));
}

const mockPort = await freePort();
const mock = await start(['--import', 'tsx', 'bench/mock-provider.ts'], { PORT: String(mockPort) });
const body = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'ping' }] });
for (let life = 0; life < 3; life++) {
  const port = await freePort();
  const proxy = await start(['--import', 'tsx', 'bench/baseline-proxy.ts'], { PORT: String(port), UPSTREAM: `http://127.0.0.1:${mockPort}/v1` });
  const run = (duration: number) =>
    autocannon({ url: `http://127.0.0.1:${port}/v1/inference`, method: 'POST', headers: { 'content-type': 'application/json' }, body, connections: 50, duration });
  await run(5);
  const windows: string[] = [];
  for (let i = 0; i < 3; i++) {
    const before = ticks(proxy.pid!);
    const r = await run(8);
    const used = ticks(proxy.pid!) - before;
    windows.push(`${Math.round(r.requests.total / 8)} req/s, ${Math.round((used * 1e4) / r.requests.total)} µs/request`);
  }
  console.log(`process ${life + 1}: ${windows.join('; ')}`);
  proxy.kill();
  await new Promise((r) => setTimeout(r, 300));
}
mock.kill();
