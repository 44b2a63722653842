// A batch of N chat lines through the built-in mock provider, as deployed: one api process (SVC_ROLE=api) takes the
// upload and the batch, one worker process (SVC_ROLE=worker) runs it, over PostgreSQL and Redis. Reports the
// throughput, each process's CPU per line (from /proc, over the batch's run) and the worker's RSS as the batch goes,
// sampled every 250 ms (it should plateau, not grow with the lines done, and not rise while the files are written).
//   node --import tsx bench/batch.ts [lines=10000]
// DATABASE_URL and REDIS_URL default to the local services (postgresql://postgres@127.0.0.1:5432/postgres,
// redis://127.0.0.1:6379); a fresh schema and Redis prefix are used and dropped.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { MASTER_KEY } from '../test/helpers/app.ts';
import { startGateway, type GatewayProcess } from '../test/helpers/gateway-process.ts';
import { deleteRedisPrefix, dropSchema, gatewayDatabaseUrls, uniqueName } from '../test/helpers/services.ts';

const N = Number(process.argv[2] ?? 10_000);
const DATABASE_URL = process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const TICK = Number(process.env.SC_CLK_TCK ?? 100);

/** user + system CPU of a process so far, in ms (/proc/<pid>/stat fields 14 and 15, in clock ticks). */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICK;
}

const schema = uniqueName('bench_batch');
const prefix = `${uniqueName('bb')}:`;
const { url } = await gatewayDatabaseUrls(DATABASE_URL, schema);
const env = { DATABASE_URL: url, REDIS_URL, SVC_REDIS_PREFIX: prefix, SVC_ENCRYPTION_KEY: randomBytes(32).toString('hex'), LOG_LEVEL: 'warn' };
let api: GatewayProcess | null = null;
let worker: GatewayProcess | null = null;
try {
  api = await startGateway({ ...env, SVC_ROLE: 'api' }, { timeoutMs: 300_000 });
  const call = async (method: string, path: string, body?: unknown, key = MASTER_KEY) => {
    const res = await api!.call(method, path, { key, body, timeoutMs: 120_000 });
    if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
    return res.body;
  };
  const project = await call('POST', '/v1/projects', { name: 'bench', plan: 'enterprise' });
  await call('PUT', `/v1/projects/${project.id}/rate-limits`, { requests_per_minute: 10_000_000, tokens_per_minute: 1_000_000_000, burst: 0 });
  const key = await call('POST', '/v1/keys', { project_id: project.id, name: 'bench', scopes: ['inference:write'] });
  const lines = Array.from({ length: N }, (_, i) =>
    JSON.stringify({ custom_id: `l${i}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'mock-1', messages: [{ role: 'user', content: `line ${i} of the benchmark batch` }] } }),
  );
  const form = new FormData();
  form.set('purpose', 'batch');
  form.set('file', new Blob([lines.join('\n')], { type: 'application/jsonl' }), 'bench.jsonl');

  // The api's CPU from the upload on (the worker is not running yet: the batch waits in validating).
  const apiCpu0 = cpuMs(api.pid);
  const started = performance.now();
  const up = await fetch(`${api.baseUrl}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${key.secret}` }, body: form });
  if (up.status !== 200) throw new Error(`upload: ${up.status} ${(await up.text()).slice(0, 300)}`);
  const file = (await up.json()) as { id: string; bytes: number };
  const batch = await call('POST', '/v1/batches', { input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }, key.secret);
  const uploadMs = performance.now() - started;

  worker = await startGateway({ ...env, SVC_ROLE: 'worker' }, { timeoutMs: 300_000 });
  const workerCpu0 = cpuMs(worker.pid);
  const runStarted = performance.now();
  // RSS sampled every 250 ms, each sample with the batch's status and lines done as last polled: the series by lines
  // done while lines run, and the peak while the files are written (finalizing).
  const rss: { done: number; status: string; worker_mb: number; api_mb: number }[] = [];
  const statuses = new Set<string>();
  let last: { status: string; request_counts: { total: number; completed: number; failed: number } } = { status: 'validating', request_counts: { total: N, completed: 0, failed: 0 } };
  const sample = () => {
    try {
      rss.push({ done: last.request_counts.completed + last.request_counts.failed, status: last.status, worker_mb: worker!.rssMb(), api_mb: api!.rssMb() });
    } catch {
      // the process is gone
    }
  };
  sample();
  const sampler = setInterval(sample, 250);
  for (;;) {
    last = await call('GET', `/v1/batches/${batch.id}`, undefined, key.secret);
    statuses.add(last.status);
    if (['completed', 'failed', 'expired', 'cancelled'].includes(last.status)) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  clearInterval(sampler);
  sample();
  const runMs = performance.now() - runStarted;
  const workerCpu = cpuMs(worker.pid) - workerCpu0;
  const apiCpu = cpuMs(api.pid) - apiCpu0;
  // The worker's RSS at each tenth of the lines done: flat once its caches and pools are warm.
  const at = (share: number) => rss.find((r) => r.done >= share * N) ?? rss.at(-1)!;
  const byTenth = Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`${i * 10}%`, at(i / 10).worker_mb]));
  const peak = (status: string) => Math.max(0, ...rss.filter((r) => r.status === status).map((r) => r.worker_mb));
  console.log(
    JSON.stringify(
      {
        lines: N,
        file_mb: +(file.bytes / 1048576).toFixed(2),
        status: last.status,
        statuses_seen: [...statuses],
        counts: last.request_counts,
        upload_and_create_s: +(uploadMs / 1000).toFixed(1),
        run_s: +(runMs / 1000).toFixed(1),
        lines_per_s: Math.round(N / (runMs / 1000)),
        worker_cpu_ms_per_line: +(workerCpu / N).toFixed(3),
        api_cpu_ms_per_line: +(apiCpu / N).toFixed(3),
        worker_rss_mb: { by_lines_done: byTenth, max_in_progress: peak('in_progress'), max_finalizing: peak('finalizing'), max: Math.max(...rss.map((r) => r.worker_mb)), samples: rss.length },
        api_rss_mb: { at_0: rss[0]!.api_mb, max: Math.max(...rss.map((r) => r.api_mb)), end: rss.at(-1)!.api_mb },
      },
      null,
      2,
    ),
  );
} finally {
  await worker?.stop();
  await api?.stop();
  await dropSchema(DATABASE_URL, schema).catch(() => undefined);
  await deleteRedisPrefix(REDIS_URL, prefix).catch(() => undefined);
}
process.exit(0);
