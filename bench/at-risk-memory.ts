/**
 * `node --expose-gc --import tsx bench/at-risk-memory.ts`: what the usage stream's at-risk list (the entries of the
 * last AT_RISK_MS, kept to append again after a Redis failover: jobs/outcomes/redis-stream.ts) costs per outcome in
 * V8's heap, kept as each outcome's object (as it was) against kept as its turn's stream entry fields (as it is), for
 * TURN (20) outcomes per entry. The outcome is a real one (an uncached inference of the embedded app, its content
 * retained), cloned N times.
 */
import { buildTestApp, client, seedProject } from '../test/helpers/app.ts';
import { streamEntryFields } from '../src/jobs/outcomes/codec.ts';
import type { InferenceOutcome } from '../src/domain/usage/outcome.ts';

const t = await buildTestApp({ env: { SVC_CHECK_RESPONSES: 'false' } });
const api = client(t.app);
const seeded = await seedProject(api, { scopes: ['keys:manage', 'inference:write'] });
const asKey = client(t.app, seeded.secret);
const captured: InferenceOutcome[] = [];
const q = t.deps.outcomes as unknown as { record: (o: InferenceOutcome) => Promise<void> };
const orig = q.record.bind(q);
q.record = async (o) => { captured.push(o); return orig(o); };
for (let i = 0; i < 20; i++) await asKey.post('/v1/inference', { project_id: seeded.projectId, model: 'mock-1', messages: [{ role: 'user', content: 'ping' }] });
const sample = captured.at(-1)!;
console.log(JSON.stringify(sample, (_k, v) => (typeof v === 'bigint' ? String(v) : v)).length, 'bytes of JSON per outcome');
const N = 9000;
const gc = (globalThis as { gc?: () => void }).gc!;
const clone = () => structuredClone(sample) as InferenceOutcome;
gc(); let h0 = process.memoryUsage().heapUsed;
const objects: unknown[] = [];
for (let i = 0; i < N; i++) objects.push({ at: i, item: { shard: null, o: clone() } });
gc(); const objBytes = process.memoryUsage().heapUsed - h0;
const keepO = objects.length;
gc(); h0 = process.memoryUsage().heapUsed;
const entries: unknown[] = [];
const TURN = Number(process.env.TURN ?? 20);
for (let i = 0; i < N; i += TURN) entries.push({ at: i, item: { shard: null, fields: streamEntryFields(Array.from({ length: TURN }, clone), t.deps.webhooks.secretBox) } });
gc(); const fieldBytes = process.memoryUsage().heapUsed - h0;
console.log(`${N} outcomes kept as objects: ${(objBytes / 2 ** 20).toFixed(1)} MB (${Math.round(objBytes / N)} B each); as entry fields (${TURN} per turn): ${(fieldBytes / 2 ** 20).toFixed(1)} MB (${Math.round(fieldBytes / N)} B each)`, keepO, entries.length);
await t.close();
process.exit(0);
