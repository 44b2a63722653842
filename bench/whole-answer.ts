import { spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { postWhole } from '../src/providers/whole-answer.ts';

/**
 * node --import tsx bench/whole-answer.ts: the client process's CPU per call for a provider's whole answer, read the
 * way the adapters did before (`pool.request` + `body.text()`) and the way they do now (`postWhole`, undici's dispatch
 * API), alternately, against the bench's mock provider in a child process (a chat completion answered at once).
 * Sequential calls (concurrency 1) and 16 at a time; the first round of each is a warm-up and not printed.
 */
// The bench's mock provider (bench/mock-provider.ts): a chat completion answered at once.
const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('./mock-provider.ts', import.meta.url))], { stdio: ['ignore', 'pipe', 'inherit'] });
const port = await new Promise<number>((resolve) => {
  let out = '';
  child.stdout!.on('data', (d) => {
    out += d;
    const m = /LISTENING (\d+)/.exec(out);
    if (m) resolve(Number(m[1]));
  });
});
const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 64, pipelining: 1 });
const headers = { 'content-type': 'application/json', accept: 'application/json' };
const payload = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'ping' }] });
// A signal as the router's hops carry one (an EventEmitter with aborted and reason), shared by the calls in flight.
const signal = Object.assign(new EventEmitter().setMaxListeners(0), { aborted: false, reason: undefined });
const ways: [string, () => Promise<unknown>][] = [
  ['pool.request + body.text()', async () => JSON.parse(await (await pool.request({ method: 'POST', path: '/v1/chat/completions', headers, body: payload, signal })).body.text())],
  ['postWhole (dispatch)', async () => JSON.parse((await postWhole(pool, { path: '/v1/chat/completions', headers, body: payload, signal })).text)],
];
const N = Number(process.env.BENCH_CALLS ?? 10_000);
for (const concurrency of [1, 16]) {
  for (let round = 0; round < 4; round++) {
    for (const [name, call] of ways) {
      let left = N;
      const before = process.cpuUsage();
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (left-- > 0) await call();
        }),
      );
      const used = process.cpuUsage(before);
      if (round > 0) console.log(`concurrency ${concurrency}  ${name.padEnd(28)} ${((used.user + used.system) / N).toFixed(1)} µs per call`);
    }
  }
}
await pool.close();
child.kill();
