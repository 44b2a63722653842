import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { InferenceOutcome } from '../../src/domain/usage/outcome.ts';
import type { RequestTimings } from '../../src/domain/usage/outcome.ts';
import { decodeStreamEntry, streamEntryFields } from '../../src/jobs/outcomes/codec.ts';
import { persistOutcomes } from '../../src/jobs/outcomes/persist-outcomes.ts';
import { buildTestApp, client, seedProject, type TestApp } from '../helpers/app.ts';
import { testOutcome } from '../helpers/outcomes.ts';

/**
 * The usage record's trace id and timings through the outcome writer: the usage stream's entry (codec) and the batch
 * insert (jsonb_to_recordset); an entry queued by an earlier version, without them, is still written (null).
 */
let t: TestApp;
let projectId: string;
let keyId: string;
let secret: string;

beforeAll(async () => {
  t = await buildTestApp();
  ({ projectId, keyId, secret } = await seedProject(client(t.app), { scopes: ['usage:read'] }));
}, 120_000);
afterAll(() => t?.close());

const TIMINGS: RequestTimings = {
  authenticatedMs: 0.4,
  validatedMs: 0.9,
  admittedMs: 1.6,
  hops: [
    { route: 'down/mock-priced', model: 'mock-priced', startMs: 1.8, durationMs: 12.5, outcome: 'error', error: 'http_503' },
    { route: 'priced/mock-priced', model: 'mock-priced', startMs: 14.4, durationMs: 3.1, outcome: 'ok', error: null },
  ],
  answeredMs: 17.6,
  totalMs: 18.2,
};

const persist = (outcomes: InferenceOutcome[]) => persistOutcomes({ sql: t.deps.database.sql, sealer: t.deps.webhooks.secretBox }, outcomes, new Date(t.clock.now()));
const sealer = () => t.deps.webhooks.secretBox;

describe('trace id and timings through the outcome writer', () => {
  it('travels in the stream entry and lands in the usage record', { timeout: 60_000 }, async () => {
    const o: InferenceOutcome = { ...testOutcome(projectId, keyId, new Date(t.clock.now())), traceId: '4bf92f3577b34da6a3ce929d0e0e4736', timings: TIMINGS };
    const [decoded] = decodeStreamEntry(streamEntryFields([o], sealer()), sealer());
    expect(decoded).toMatchObject({ traceId: o.traceId, timings: TIMINGS });
    await persist([decoded!]);
    const row = await t.deps.db.usageRecord.findFirst({ where: { requestId: o.requestId } });
    expect(row).toMatchObject({ traceId: '4bf92f3577b34da6a3ce929d0e0e4736', timings: TIMINGS });
    const detail = await client(t.app, secret).get(`/v1/usage/requests/${o.requestId}`);
    expect(detail.body.trace_id).toBe(o.traceId);
    expect(detail.body.timings.hops.map((h: { route: string; outcome: string }) => `${h.route}:${h.outcome}`)).toEqual([
      'down/mock-priced:error',
      'priced/mock-priced:ok',
    ]);
    expect(detail.body.timeline.map((s: { offset_ms: number }) => s.offset_ms)).toEqual([0, 0, 0.4, 0.9, 1.6, 1.8, 14.4, 17.5, 17.6]);
  });

  it("writes an earlier version's entry, which has neither, with both null", { timeout: 60_000 }, async () => {
    const o = testOutcome(projectId, keyId, new Date(t.clock.now()));
    // What the usage stream held before: the outcome's JSON without traceId and timings (both entry forms).
    const wire = { ...o, costMicros: o.costMicros.toString(), createdAt: o.createdAt.getTime() };
    const batchForm = decodeStreamEntry(['b', JSON.stringify([wire])], sealer());
    const single = { ...testOutcome(projectId, keyId, new Date(t.clock.now())) };
    const singleForm = decodeStreamEntry(['o', JSON.stringify({ ...single, costMicros: '0', createdAt: single.createdAt.getTime() })], sealer());
    expect(batchForm[0]).not.toHaveProperty('timings');
    await persist([...batchForm, ...singleForm]);
    const rows = await t.deps.db.usageRecord.findMany({ where: { requestId: { in: [o.requestId, single.requestId] } } });
    expect(rows.map((r) => [r.traceId, r.timings])).toEqual([
      [null, null],
      [null, null],
    ]);
    const detail = await client(t.app, secret).get(`/v1/usage/requests/${o.requestId}`);
    expect(detail.status).toBe(200);
    expect(detail.body).toMatchObject({ trace_id: null, timings: null });
    expect(detail.body.timeline.map((s: { step: string }) => s.step)).toEqual(['received', 'authenticated', 'limits', 'cache', 'provider', 'outcome']);
  });
});
