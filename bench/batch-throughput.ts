// A batch of N chat lines through the built-in mock provider, run by one BatchRunner in this process:
// lines per second, CPU per line and the heap before and after.
//   node --import tsx bench/batch-throughput.ts [lines=10000] [concurrency=4]
import { BatchRunner } from '../src/jobs/batch-runner/runner.ts';
import { buildTestApp, client, seedProject } from '../test/helpers/app.ts';
import { multipart } from '../test/rag/support.ts';

const N = Number(process.argv[2] ?? 10_000);
const CONCURRENCY = Number(process.argv[3] ?? 4);
const t = await buildTestApp({ env: { LOG_LEVEL: 'warn' } });
const s = await seedProject(client(t.app), { plan: 'growth', scopes: ['inference:write'], limits: { requests_per_minute: 10_000_000, tokens_per_minute: 1_000_000_000, burst: 0 } });
const lines = Array.from({ length: N }, (_, i) => JSON.stringify({ custom_id: `l${i}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'mock-1', messages: [{ role: 'user', content: `line ${i}` }] } }));
const { payload, contentType } = multipart({ name: 'in.jsonl', type: 'application/jsonl', data: lines.join('\n') }, { purpose: 'batch' });
const up = await t.app.inject({ method: 'POST', url: '/v1/files', headers: { authorization: `Bearer ${s.secret}`, 'content-type': contentType }, payload });
const fileId = JSON.parse(up.body).id;
const created = await client(t.app, s.secret).post('/v1/batches', { input_file_id: fileId, endpoint: '/v1/chat/completions', completion_window: '24h' });
if (up.statusCode !== 200 || created.status !== 200) throw new Error(`setup failed: ${up.statusCode} ${up.body.slice(0, 300)} ${created.status} ${created.raw.slice(0, 300)}`);
const batchId = created.body.id;
global.gc?.();
const heapBefore = process.memoryUsage().heapUsed;
let heapPeak = heapBefore;
const sampler = setInterval(() => (heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed)), 100);
const cpu0 = process.cpuUsage();
const t0 = performance.now();
await new BatchRunner(t.deps, { concurrency: CONCURRENCY }).runPending();
const ms = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
clearInterval(sampler);
global.gc?.();
const done = (await client(t.app, s.secret).get(`/v1/batches/${batchId}`)).body;
const mb = (b: number) => (b / 1048576).toFixed(0);
console.log(JSON.stringify({ lines: N, concurrency: CONCURRENCY, status: done.status, counts: done.request_counts, seconds: +(ms / 1000).toFixed(1), lines_per_s: Math.round(N / (ms / 1000)), cpu_ms_per_line: +((cpu.user + cpu.system) / 1000 / N).toFixed(2), heap_mb: { before: mb(heapBefore), peak: mb(heapPeak), after: mb(process.memoryUsage().heapUsed) } }));
await t.close();
process.exit(0);
