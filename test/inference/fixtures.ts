import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';
import type { TestApp } from '../helpers/app.ts';

/** Writes a providers file (JSON, or YAML text as given) to a temp path and returns the path. */
export function writeProvidersFile(doc: unknown, ext: 'json' | 'yaml' | 'yml' = 'json'): string {
  const file = path.join(tmpdir(), `svc-providers-${randomBytes(6).toString('hex')}.${ext}`);
  writeFileSync(file, typeof doc === 'string' ? doc : JSON.stringify(doc, null, 2));
  return file;
}

export const user = (content: string) => [{ role: 'user', content }];

/** The exact keys of CONTRACT §8's response. */
export const INFERENCE_KEYS = [
  'cache_hit',
  'cost_usd',
  'created_at',
  'finish_reason',
  'id',
  'message',
  'model',
  'object',
  'region',
  'request_id',
  'route',
  'usage',
];

export const USAGE_RECORD_KEYS = [
  'cache_hit',
  'completion_tokens',
  'cost_usd',
  'created_at',
  'error_code',
  'key_id',
  'latency_ms',
  'model',
  'object',
  'project_id',
  'prompt_tokens',
  'region',
  'request_id',
  'route',
  'status',
];

export interface ExpectedOutcome {
  status: 'succeeded' | 'failed';
  errorCode?: string | null;
  route?: string | null;
  region?: string | null;
  cacheHit?: boolean;
  costMicros?: bigint;
  promptTokens?: number;
  completionTokens?: number;
}

/**
 * The request left exactly one usage record and exactly one inference.completed event, whose data is the spec's
 * (2.4): request_id, route, cache_hit, cost_usd, region. They are written off the request path in batches: flushed
 * first (what a reader on this replica gets anyway: GET /v1/usage flushes too).
 */
export async function expectOneOutcome(t: TestApp, requestId: string, want: ExpectedOutcome) {
  await t.deps.outcomes.flush();
  const records = await t.deps.db.usageRecord.findMany({ where: { requestId } });
  expect(records).toHaveLength(1);
  const r = records[0]!;
  expect(r.status).toBe(want.status);
  if (want.errorCode !== undefined) expect(r.errorCode).toBe(want.errorCode);
  if (want.route !== undefined) expect(r.route).toBe(want.route);
  if (want.region !== undefined) expect(r.region).toBe(want.region);
  if (want.cacheHit !== undefined) expect(r.cacheHit).toBe(want.cacheHit);
  if (want.costMicros !== undefined) expect(r.costMicros).toBe(want.costMicros);
  if (want.promptTokens !== undefined) expect(r.promptTokens).toBe(want.promptTokens);
  if (want.completionTokens !== undefined) expect(r.completionTokens).toBe(want.completionTokens);

  const events = await t.deps.db.event.findMany({
    where: { projectId: r.projectId, type: 'inference.completed', data: { path: ['request_id'], equals: requestId } },
  });
  expect(events).toHaveLength(1);
  expect(events[0]!.data).toEqual({
    request_id: requestId,
    route: r.route,
    cache_hit: r.cacheHit,
    cost_usd: Number(r.costMicros) / 1e6,
    region: r.region,
  });
  return r;
}

export async function expectNoOutcome(t: TestApp, requestId: string) {
  await t.deps.outcomes.flush();
  expect(await t.deps.db.usageRecord.count({ where: { requestId } })).toBe(0);
  expect(
    await t.deps.db.event.count({ where: { type: 'inference.completed', data: { path: ['request_id'], equals: requestId } } }),
  ).toBe(0);
}
