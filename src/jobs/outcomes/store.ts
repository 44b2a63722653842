import type { RawSql } from '../../db/sql.ts';
import type { InferenceOutcome } from '../../domain/usage/outcome.ts';

/**
 * Inserts the batch's usage records, skipping those already written (a request id recorded in any month: the
 * usage_records_dedup trigger of the partitions migration); returns the request ids it inserted. One statement for
 * the whole batch, which travels as one JSON parameter: Prisma's createMany costs ~0.5 ms of gateway CPU per row, and
 * even array parameters or per-row results cost ~0.05 ms; this costs a JSON.stringify.
 */
export async function insertUsageRecords(tx: RawSql, outcomes: readonly InferenceOutcome[]): Promise<Set<string>> {
  const rows = outcomes.map((o) => ({
    request_id: o.requestId,
    project_id: o.projectId,
    key_id: o.keyId,
    model: o.model,
    route: o.route,
    region: o.region,
    cache_hit: o.cacheHit,
    status: o.status,
    error_code: o.errorCode,
    prompt_tokens: o.promptTokens,
    completion_tokens: o.completionTokens,
    cost_micros: o.costMicros.toString(),
    latency_ms: o.latencyMs,
    created_at: o.createdAt.toISOString(),
    template_id: o.templateId ?? null,
    template_version: o.templateVersion ?? null,
    customer: o.customer ?? null,
    // Absent on outcomes queued by an earlier version: null.
    trace_id: o.traceId ?? null,
    timings: o.timings ?? null,
  }));
  const [inserted] = await tx.$queryRaw<{ written: string | null }[]>`
    WITH u AS (
      INSERT INTO usage_records (request_id, project_id, key_id, model, route, region, cache_hit, status, error_code,
                                 prompt_tokens, completion_tokens, cost_micros, latency_ms, created_at, template_id, template_version,
                                 customer, trace_id, timings)
      SELECT * FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS x(
        request_id text, project_id text, key_id text, model text, route text, region text, cache_hit boolean, status text,
        error_code text, prompt_tokens int, completion_tokens int, cost_micros bigint, latency_ms int, created_at timestamptz,
        template_id text, template_version int, customer text, trace_id text, timings jsonb)
      ON CONFLICT DO NOTHING
      RETURNING request_id
    )
    SELECT string_agg(request_id, ',') AS written FROM u`;
  return new Set(inserted?.written ? inserted.written.split(',') : []);
}

/** Whether the database answers a trivial query within `timeoutMs` (a failing batch: poison entry, or outage?). */
export async function databaseAnswers(sql: RawSql, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      sql.$queryRaw`SELECT 1`.then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs))),
    ]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}
