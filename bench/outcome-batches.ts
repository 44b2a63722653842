/**
 * `node --import tsx bench/outcome-batches.ts`: the outcome writer's batch (src/jobs/outcomes/persist-outcomes.ts)
 * written through Prisma's interactive transaction and raw queries (the path before) and on the driver directly
 * (db/sql.ts, the path now), alternately in one process, against PostgreSQL (DATABASE_URL) in a throw-away schema.
 * Prints this process's CPU per outcome (user + system), which is the worker's share of a batch; PostgreSQL's own is
 * not in it. BATCHES (100) batches of BATCH (200) outcomes per pass, each with ~1 KB of sealed content, three passes.
 */
import { randomBytes } from 'node:crypto';
import { openDatabase } from '../src/db/client.ts';
import { newId } from '../src/db/ids.ts';
import { applyMigrations } from '../src/db/migrations.ts';
import type { SqlDriver } from '../src/db/sql.ts';
import { periodOf } from '../src/domain/budgets/service.ts';
import type { InferenceOutcome } from '../src/domain/usage/outcome.ts';
import { persistOutcomes } from '../src/jobs/outcomes/persist-outcomes.ts';
import { AesGcmSecretBox } from '../src/kernel/secret-box.ts';

const base = process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/postgres';
const schema = `bench_batches_${randomBytes(4).toString('hex')}`;
const url = new URL(base);
url.searchParams.set('schema', schema);
await applyMigrations({ kind: 'postgres', url: url.toString() });
const db = await openDatabase({ databaseUrl: url.toString(), dataDir: null });
const prisma = db.prisma;

const projectId = newId('prj');
const keyId = newId('key');
await prisma.project.create({ data: { id: projectId, name: 'bench', createdAt: new Date() } });
await prisma.apiKey.create({
  data: { id: keyId, projectId, name: 'bench', scopes: ['inference:write'], secretHash: randomBytes(32).toString('hex'), secretLast4: 'abcd', createdAt: new Date() },
});

/** The path before: the same statements through Prisma's client and its interactive transaction. */
const throughPrisma = {
  $queryRaw: (s: TemplateStringsArray, ...v: unknown[]) => prisma.$queryRaw(s, ...v),
  $executeRaw: (s: TemplateStringsArray, ...v: unknown[]) => prisma.$executeRaw(s, ...v),
  transaction: (fn) => prisma.$transaction((tx) => fn(tx), { timeout: 30_000, maxWait: 10_000 }),
  onStatement: () => {},
} satisfies SqlDriver;

const sealed = randomBytes(700).toString('base64url');
/** The outcomes carry their content sealed already (the form before the worker sealed it): the sealer is not used. */
const sealer = new AesGcmSecretBox(randomBytes(32));
const batchOf = (n: number): InferenceOutcome[] =>
  Array.from({ length: n }, () => {
    const at = new Date();
    return {
      requestId: newId('req'),
      projectId,
      keyId,
      model: 'bench-model',
      route: 'mock/bench-model',
      region: 'local',
      cacheHit: false,
      status: 'succeeded',
      errorCode: null,
      promptTokens: 12,
      completionTokens: 20,
      costMicros: 52n,
      latencyMs: 1,
      createdAt: at,
      eventId: newId('evt', at.getTime()),
      spend: { keyId, period: periodOf(at) },
      retained: { inferenceId: newId('inf'), status: 'succeeded', sealed, retainedUntil: at.getTime() + 30 * 86_400_000 },
    };
  });

const BATCHES = Number(process.env.BATCHES ?? 100);
const BATCH = Number(process.env.BATCH ?? 200);
async function pass(name: string, driver: SqlDriver): Promise<void> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  for (let i = 0; i < BATCHES; i++) await persistOutcomes({ sql: driver, sealer }, batchOf(BATCH), new Date());
  const used = process.cpuUsage(cpu);
  const n = BATCHES * BATCH;
  const wall = ((performance.now() - started) * 1000) / n;
  console.log(`${name.padEnd(24)} ${((used.user + used.system) / n).toFixed(1)} µs CPU per outcome, ${wall.toFixed(1)} µs wall`);
}

try {
  for (let round = 0; round < 3; round++) {
    await pass('through Prisma', throughPrisma);
    await pass('driver directly', db.sql);
  }
} finally {
  await prisma.$executeRawUnsafe(`DROP SCHEMA "${schema}" CASCADE`);
  await db.close();
}
