import { existsSync } from 'node:fs';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { seedProject } from '../helpers/app.ts';
import { pollUntil, type GatewayProcess } from '../helpers/gateway-process.ts';
import { createSchemaRole, PGBOUNCER_PATH, pooledUrl, startPgBouncer, type PgBouncer } from '../helpers/pgbouncer.ts';
import { NO_SERVICES, NO_SERVICES_REASON, openServices, type TestServices } from '../helpers/private-services.ts';
import { startReplica } from '../helpers/processes.ts';
import { REQUIRE_ENGINES } from '../helpers/redis-engines.ts';
import { DATABASE_URL, PGBOUNCER_URL, withSchema } from '../helpers/services.ts';
import { acceptedIds, deploy, expectRecorded, five, infer, OPEN_PROJECT, tally, type Deployment } from '../system/replicas/support.ts';

/**
 * kill -9 of the usage stream's consumer with entries it had READ and not yet WRITTEN, every run (not by chance):
 * the victim worker reaches PostgreSQL through a PgBouncer of its own, which the test PAUSEs (the pooler holds the
 * victim's queries; nobody else uses it), so the victim's XREADGROUP succeeds and its write cannot finish. The test
 * sees the entries in the stream's PEL under the victim's consumer, kills the victim with SIGKILL, and the surviving
 * worker (direct to PostgreSQL, alive all along but without the shard's lease) takes the lease when it expires and
 * claims the dead consumer's entries (XAUTOCLAIM, src/jobs/outcomes/redis-stream.ts + stream-shards.ts): they are
 * acknowledged and deleted, and every accepted request has its usage record and one inference.completed.
 */
const RUN = !NO_SERVICES && (existsSync(PGBOUNCER_PATH) || REQUIRE_ENGINES);
const LEASE_MS = 2_000;
const GROUP = 'writers';

let services: TestServices;
let bouncer: PgBouncer;
let d: Deployment;
let redis: Redis;

describe.runIf(RUN)(RUN ? 'the usage stream taken over from a consumer killed with entries read and unwritten' : `stream takeover (${NO_SERVICES_REASON} or no pgbouncer)`, () => {
  beforeAll(async () => {
    services = await openServices();
    const server = new URL(DATABASE_URL ?? services.postgres!.url);
    bouncer = await startPgBouncer({ target: { host: server.hostname, port: Number(server.port || 5432) } });
    redis = new Redis(services.redisUrl, { maxRetriesPerRequest: 1 });
  }, 60_000);

  afterAll(async () => {
    await d?.close();
    redis?.disconnect();
    await bouncer?.admin('RESUME').catch(() => {});
    await bouncer?.stop();
    await services?.close();
    // The schema's role (createSchemaRole); under npm run test:pgbouncer the services drop it themselves.
    if (services && !PGBOUNCER_URL) {
      const c = new pg.Client({ connectionString: DATABASE_URL ?? services.postgres!.url });
      await c.connect().then(() => c.query(`DROP ROLE IF EXISTS "${services.schema}"`)).catch(() => {});
      await c.end().catch(() => {});
    }
  });

  it('the survivor claims and writes, every time, the entries the killed consumer had read', { timeout: 300_000 }, async () => {
    const base = DATABASE_URL ?? services.postgres!.url;
    const direct = withSchema(base, services.schema);
    await createSchemaRole(base, services.schema);
    d = await deploy(services, { DATABASE_URL: direct, SVC_OUTCOME_LEASE_MS: String(LEASE_MS), SVC_USAGE_STREAM_SHARDS: '1' });
    const stream = `${services.redisPrefix}usage:outcomes`;
    const lease = `${stream}:lease`;
    const holder = async () => String((await redis.get(lease)) ?? '');

    // The victim: a worker whose usage writes go through the pooler (DATABASE_URL), the rest direct.
    const victim = await startReplica(d, { SVC_ROLE: 'worker', DATABASE_URL: pooledUrl(bouncer.url, services.schema), DATABASE_DIRECT_URL: direct, DATABASE_POOL_SIZE: '2' });
    await pollUntil('the victim holds the stream lease', async () => (await holder()).includes(`:${victim.pid}:`), 15_000, 50);
    // The survivor: alive and announced as a consumer, but the lease is the victim's while it lives.
    const [survivor, api] = await Promise.all([
      startReplica(d, { SVC_ROLE: 'worker', DATABASE_POOL_SIZE: '2' }),
      startReplica(d, { SVC_ROLE: 'api', DATABASE_POOL_SIZE: '2' }),
    ]);
    const procs: GatewayProcess[] = [victim, survivor, api];
    onTestFailed(() => {
      for (const g of procs) console.error(`pid ${g.pid} (${g.env.SVC_ROLE}) output:\n${g.output().slice(-3_000)}`);
    });
    const s = await seedProject(api, OPEN_PROJECT);
    const warm = await Promise.all(Array.from({ length: 5 }, (_, i) => infer(api, s, five(i))));
    await expectRecorded(services, acceptedIds(warm), 15_000);
    expect(await holder()).toContain(`:${victim.pid}:`);

    // The pooler holds the victim's queries from now on.
    await bouncer.admin('PAUSE');
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => infer(api, s, five(100 + i))));
    expect(tally(answers)).toEqual({ '200': 20 });
    const ids = acceptedIds(answers);

    // Read by the victim and not written: pending under its consumer name, no usage record.
    type Pending = [id: string, consumer: string, idleMs: number, deliveries: number];
    const pending = await pollUntil(
      'entries pending with the victim',
      async () => {
        const p = (await redis.xpending(stream, GROUP, '-', '+', 1_000)) as Pending[];
        return p.length > 0 && p.every(([, c]) => c.includes(`:${victim.pid}:`)) ? p : null;
      },
      10_000,
      20,
    );
    const held = pending.map(([id]) => id);
    const before = await services.sql<{ n: string }>('SELECT count(*) AS n FROM usage_records WHERE request_id = ANY($1)', [ids]);
    expect(Number(before[0]!.n)).toBe(0);
    expect(await holder()).toContain(`:${victim.pid}:`);

    const killedAt = performance.now();
    expect(await victim.stop('SIGKILL')).toBe('SIGKILL');
    // The pooler may let queries through again: the dead victim sends none.
    await bouncer.admin('RESUME');

    // The survivor takes the lease once it expires, and claims what the victim held.
    await pollUntil('the survivor holds the lease', async () => (await holder()).includes(`:${survivor.pid}:`), LEASE_MS + 5_000, 20);
    const tookOverMs = Math.round(performance.now() - killedAt);
    await expectRecorded(services, ids, 15_000);
    const writtenMs = Math.round(performance.now() - killedAt);
    // Each entry the victim held is acknowledged and deleted: claimed and written (the victim was dead by then).
    const stillPending = (await redis.xpending(stream, GROUP, '-', '+', 1_000)) as Pending[];
    expect(stillPending.filter(([id]) => held.includes(id))).toEqual([]);
    for (const id of held) expect(await redis.xrange(stream, id, id)).toEqual([]);
    const consumers = ((await redis.xinfo('CONSUMERS', stream, GROUP)) as unknown[][]).map((pairs) => {
      const o: Record<string, unknown> = {};
      for (let i = 0; i < pairs.length; i += 2) o[String(pairs[i])] = pairs[i + 1];
      return o;
    });
    const victimConsumer = consumers.find((c) => String(c.name).includes(`:${victim.pid}:`));
    // Forgotten (no pending entries left) or still listed with nothing pending.
    expect(victimConsumer?.pending ?? 0).toBe(0);
    // And nothing was written twice: one usage record per request (expectRecorded counted one event each).
    const rows = await services.sql<{ n: string }>('SELECT count(*) AS n FROM usage_records WHERE request_id = ANY($1)', [ids]);
    expect(Number(rows[0]!.n)).toBe(ids.length);
    console.info(
      `takeover: ${held.length} entries pending with the killed consumer (${ids.length} inferences); lease taken ${tookOverMs} ms after the kill, all written ${writtenMs} ms after (lease ${LEASE_MS} ms)`,
    );
  });
});
