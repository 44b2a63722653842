import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { DATABASE_URL, uniqueName } from '../helpers/services.ts';
import { DirectSession } from '../../src/db/direct-session.ts';
import { AdvisoryLeadership, soleLeader, type Leadership } from '../../src/db/leadership.ts';
import { startSweep } from '../../src/jobs/sweep.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const quiet = { info: () => {}, error: () => {} };
// CI=1 runs with DATABASE_URL (.ci/run): there this never skips.
const needsPostgres = !DATABASE_URL && process.env.CI !== '1';

/** Sweep period of these tests; the takeover bound is 2 × it (src/jobs/sweep.ts). */
const PERIOD_MS = 400;

/** A sweep that records when it ran, on the given leadership. */
function countingSweep(leadership: Leadership, name: string) {
  const runs: number[] = [];
  const sweep = startSweep(
    quiet,
    { run: async () => (runs.push(performance.now()), 0), done: () => [{}, ''], failed: 'sweep failed' },
    PERIOD_MS,
    { leadership, name },
  );
  return { runs, stop: () => sweep.stop() };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what: string, check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

describe('the embedded database', () => {
  it('leads every sweep itself (one process)', async () => {
    expect(await soleLeader.lead('approval-expiry')).toBe(true);
    const s = countingSweep(soleLeader, 'approval-expiry');
    await until('the first run', () => s.runs.length > 0);
    s.stop();
  });
});

describe.skipIf(needsPostgres)('one leader per sweep on PostgreSQL (advisory lock on the direct session)', () => {
  const sessions: DirectSession[] = [];
  const children: ChildProcess[] = [];
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await Promise.all(sessions.map((s) => s.close()));
  });
  const replica = (schema: string) => {
    const session = new DirectSession(DATABASE_URL!, { warn: () => {} });
    sessions.push(session);
    return { session, leadership: new AdvisoryLeadership(session, schema) };
  };

  it('runs a sweep on one of two replicas; the other takes over within 2 periods once the leader stops', async () => {
    const schema = uniqueName('lead');
    const a = replica(schema);
    const b = replica(schema);
    const sa = countingSweep(a.leadership, 'daily-summary');
    await until('a leads', () => sa.runs.length > 0);
    const sb = countingSweep(b.leadership, 'daily-summary');
    await sleep(4 * PERIOD_MS);
    expect(sa.runs.length).toBeGreaterThanOrEqual(3);
    expect(sb.runs).toEqual([]);
    // Another sweep's lead is its own: b may lead it while a leads daily-summary.
    expect(await b.leadership.lead('approval-expiry')).toBe(true);
    expect(await a.leadership.lead('approval-expiry')).toBe(false);
    // A schema's leads are its own: another schema (another test, another deployment) leads its sweeps apart.
    expect(await replica(uniqueName('lead')).leadership.lead('daily-summary')).toBe(true);

    const stoppedAt = performance.now();
    sa.stop();
    const ranBefore = sa.runs.length;
    await until('b takes over', () => sb.runs.length > 0);
    expect(sb.runs[0]! - stoppedAt).toBeLessThanOrEqual(2 * PERIOD_MS);
    await sleep(2 * PERIOD_MS);
    expect(sa.runs.length).toBe(ranBefore);
    sb.stop();
  });

  it('keeps one leader when the leader session is cut: whichever asks first after the cut leads, never both', async () => {
    const schema = uniqueName('lead');
    const a = replica(schema);
    const b = replica(schema);
    const sa = countingSweep(a.leadership, 'retention-purge');
    await until('a leads', () => sa.runs.length > 0);
    const sb = countingSweep(b.leadership, 'retention-purge');
    await sleep(2 * PERIOD_MS);
    expect(sb.runs).toEqual([]);
    // The server ends a's connection (what a failover or a network cut does): its lock goes with it.
    const killer = replica(uniqueName('x'));
    await killer.session.query('SELECT pg_terminate_backend($1)', [a.session.pid]);
    const cutAt = performance.now();
    await sleep(5 * PERIOD_MS);
    // From the tick after the cut on: a reconnects and asks again like b; one of them holds the new lock and runs.
    const settled = cutAt + PERIOD_MS;
    const after = [sa.runs.filter((t) => t > settled).length, sb.runs.filter((t) => t > settled).length];
    expect(after.filter((n) => n > 0)).toHaveLength(1);
    expect(Math.max(...after)).toBeGreaterThanOrEqual(3);
    expect(a.session.connected || sb.runs.length > 0).toBe(true);
    sa.stop();
    sb.stop();
  });

  it('takes over from a leader process killed with SIGKILL within 2 periods', { timeout: 60_000 }, async () => {
    const schema = uniqueName('lead');
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/db/leader-child.ts', DATABASE_URL!, schema, 'partition-upkeep', String(PERIOD_MS)], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.push(child);
    let childRuns = 0;
    child.stdout!.on('data', (c: Buffer) => (childRuns += c.toString().split('\n').filter((l) => l === 'ran').length));
    await until('the child process leads', () => childRuns > 0, 45_000);
    const b = replica(schema);
    const sb = countingSweep(b.leadership, 'partition-upkeep');
    await sleep(3 * PERIOD_MS);
    expect(sb.runs).toEqual([]);
    expect(childRuns).toBeGreaterThanOrEqual(3);

    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    const killedAt = performance.now();
    await until('this replica takes over', () => sb.runs.length > 0);
    expect(sb.runs[0]! - killedAt).toBeLessThanOrEqual(2 * PERIOD_MS);
    sb.stop();
  });
});
