/**
 * `node --import tsx bench/rtt.ts`: the loopback TCP round trip between two Node processes on this machine, back to
 * back and with idle gaps between round trips. On a VM an idle vCPU halts and waking it costs a host round trip, so a
 * hop between processes costs more the less busy the machine is; the gateway's request has two more such hops (its
 * Redis calls before and after the provider) than a bare proxy's. README "Performance and the hot path" cites it.
 */
import { spawn } from 'node:child_process';
import net from 'node:net';

const echo = `require('net').createServer((s) => { s.setNoDelay(true); s.on('data', (d) => s.write(d)); }).listen(0, '127.0.0.1', function () { console.log(this.address().port); })`;
const server = spawn(process.execPath, ['-e', echo], { stdio: ['ignore', 'pipe', 'inherit'] });
const port = Number(await new Promise<string>((resolve) => server.stdout!.once('data', (d: Buffer) => resolve(d.toString()))));
const sock = net.connect(port, '127.0.0.1');
await new Promise((resolve) => sock.once('connect', resolve));
sock.setNoDelay(true);
const roundTrip = () =>
  new Promise<number>((resolve) => {
    const t = performance.now();
    sock.once('data', () => resolve((performance.now() - t) * 1000));
    sock.write('x');
  });
const N = 400;
for (const gapMs of [0, 1, 10]) {
  const xs: number[] = [];
  for (let i = 0; i < N; i++) {
    xs.push(await roundTrip());
    if (gapMs) await new Promise((r) => setTimeout(r, gapMs));
  }
  xs.sort((a, b) => a - b);
  const at = (q: number) => xs[Math.floor(q * N)]!.toFixed(0);
  console.log(`${gapMs} ms idle between round trips: p50 ${at(0.5)} µs, p90 ${at(0.9)} µs (${N} round trips)`);
}
sock.destroy();
server.kill();
