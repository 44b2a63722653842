import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { finishBatch, resultFileId } from '../../src/domain/batches/finalize.ts';
import { batchPortsOf } from '../../src/domain/batches/ports.ts';
import { CHUNK_BYTES } from '../../src/domain/batches/files.ts';
import { BatchRunner } from '../../src/jobs/batch-runner/runner.ts';
import { purgeExpiredRetention } from '../../src/jobs/retention-purge/purge.ts';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { multipart } from '../rag/support.ts';

/**
 * Batch files at rest (CONTRACT §21, §12): sealed chunks of whole lines, written and read a chunk at a time. An upload
 * comes back byte for byte; a batch over several chunks reads each line from the chunk that holds it; a finalizing
 * that dies mid-way is written again without a line twice; retention, zero retention and DELETE drop the chunks.
 */

let t: TestApp;
let operator: Client;

beforeAll(async () => {
  // The built-in mock provider (mock-1).
  t = await buildTestApp();
  operator = client(t.app);
}, 240_000);
afterAll(async () => {
  await t?.close();
});

const SCOPES = ['inference:write', 'governance:manage'];
const LIMITS = { requests_per_minute: 1_000_000, tokens_per_minute: 1_000_000_000, burst: 0 };
const MARKER = 'plaintext-marker-7f3a';

async function upload(key: string, data: Buffer) {
  const { payload, contentType } = multipart({ name: 'in.jsonl', type: 'application/jsonl', data }, { purpose: 'batch' });
  const res = await t.app.inject({ method: 'POST', url: '/v1/files', headers: { authorization: `Bearer ${key}`, 'content-type': contentType }, payload });
  return { status: res.statusCode, body: JSON.parse(res.body), raw: res.body };
}

async function content(key: string, fileId: string) {
  const res = await t.app.inject({ method: 'GET', url: `/v1/files/${fileId}/content`, headers: { authorization: `Bearer ${key}` } });
  return { status: res.statusCode, headers: res.headers, raw: res.rawPayload, body: res.statusCode === 200 ? null : JSON.parse(res.body) };
}

const parse = (b: Buffer) => b.toString('utf8').trim().split('\n').map((l) => JSON.parse(l));
const chunksOf = (fileId: string) => t.deps.db.batchFileChunk.findMany({ where: { fileId }, orderBy: { seq: 'asc' } });

/** 600 lines of about 500 bytes: the input spans two chunks, the lines two of the runner's pages. */
function inputFile(): Buffer {
  const pad = `${MARKER} ${'é'.repeat(200)}`;
  const lines = Array.from({ length: 600 }, (_, i) =>
    i === 550
      ? JSON.stringify({ custom_id: `c${i}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'nope-model', messages: [{ role: 'user', content: pad }] } })
      : JSON.stringify({ custom_id: `c${i}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'mock-1', messages: [{ role: 'user', content: `${i} ${pad}` }] } }),
  );
  // CRLF and blank lines, as editors write them: line numbers count them.
  return Buffer.from(`${lines.slice(0, 300).join('\r\n')}\r\n\r\n${lines.slice(300).join('\n')}\n`, 'utf8');
}

/** The runner's database, failing the `n`th chunk write of the files (a worker killed mid-way through finalizing). */
function dyingAtChunk(n: number) {
  const db = t.deps.db;
  let writes = 0;
  return new Proxy(db, {
    get(target, prop) {
      if (prop === '$executeRaw') {
        return (strings: TemplateStringsArray, ...values: unknown[]) => {
          if (strings.join('?').includes('INSERT INTO batch_file_chunks') && ++writes === n) throw new Error('killed while finalizing');
          return target.$executeRaw(strings, ...values);
        };
      }
      const v = Reflect.get(target, prop);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  }) as typeof db;
}

describe('batch files in chunks', () => {
  it('stores an upload sealed in chunks and serves it byte for byte; a batch over it runs every line once, a finalizing killed mid-way included', { timeout: 600_000 }, async () => {
    const s = await seedProject(operator, { scopes: SCOPES, limits: LIMITS });
    const api = client(t.app, s.secret);
    const data = inputFile();
    expect(data.length).toBeGreaterThan(CHUNK_BYTES);
    const f = await upload(s.secret, data);
    expect(f.status, f.raw).toBe(200);
    expect(f.body.bytes).toBe(data.length);

    // At rest: several chunks, none in clear.
    const stored = await chunksOf(f.body.id);
    expect(stored.length).toBeGreaterThanOrEqual(2);
    expect(stored.map((c) => c.seq)).toEqual(stored.map((_, i) => i));
    expect(stored.some((c) => c.sealed.includes(MARKER) || c.sealed.includes('custom_id'))).toBe(false);
    expect((await t.deps.db.batchFile.findUnique({ where: { id: f.body.id } }))!.sealed).toBeNull();
    const back = await content(s.secret, f.body.id);
    expect(back.status).toBe(200);
    expect(back.headers['content-type']).toMatch(/^application\/jsonl/);
    expect(Number(back.headers['content-length'])).toBe(data.length);
    expect(Buffer.compare(back.raw, data)).toBe(0);

    // The bad line (the 551st request) is reported by its line number in the file, blank line counted.
    const created = await api.post('/v1/batches', { input_file_id: f.body.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    expect(created.status, created.raw).toBe(200);
    expect(created.body.request_counts).toEqual({ total: 600, completed: 0, failed: 1 });
    const batchId: string = created.body.id;

    // The first worker runs every line, then dies while writing the output file's second chunk.
    const dying = new BatchRunner({ ...t.deps, db: dyingAtChunk(2) }, { leaseMs: 5_000, sleep: async (ms) => t.clock.advance(ms) });
    await expect(dying.runPending()).rejects.toThrow('killed while finalizing');
    expect((await api.get(`/v1/batches/${batchId}`)).body).toMatchObject({ status: 'finalizing', output_file_id: null, request_counts: { completed: 599, failed: 1 } });
    const outputId = resultFileId(batchId, 'output');
    expect(await chunksOf(outputId)).toHaveLength(1);

    // The next worker (after the lease) runs no line again and writes the files whole: no line twice.
    t.clock.advance(6_000);
    expect(await new BatchRunner(t.deps, { sleep: async (ms) => t.clock.advance(ms) }).runPending()).toBe(1);
    const done = (await api.get(`/v1/batches/${batchId}`)).body;
    expect(done).toMatchObject({ status: 'completed', output_file_id: outputId, request_counts: { total: 600, completed: 599, failed: 1 } });
    const out = await content(s.secret, done.output_file_id);
    expect(out.status).toBe(200);
    expect(Number(out.headers['content-length'])).toBe(out.raw.length);
    const outLines = parse(out.raw);
    const expected = Array.from({ length: 600 }, (_, i) => `c${i}`).filter((id) => id !== 'c550');
    expect(outLines.map((l) => l.custom_id)).toEqual(expected);
    expect(outLines.every((l) => l.response.status_code === 200 && l.error === null)).toBe(true);
    expect((await chunksOf(outputId)).length).toBeGreaterThanOrEqual(2);
    const outFile = (await api.get(`/v1/files/${outputId}`)).body;
    expect(outFile.bytes).toBe(out.raw.length);
    const errors = parse((await content(s.secret, done.error_file_id)).raw);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ custom_id: 'c550', response: null, error: { code: 'invalid_request', param: 'body.model', line: 552 } });
    // The lines' own copies of the results are gone: the files hold them.
    expect(await t.deps.db.batchLine.count({ where: { batchId, result: { not: null } } })).toBe(0);

    // A worker that no longer holds the batch (its lease taken over) writes nothing: the file stays whole.
    const row = (await t.deps.db.batch.findUnique({ where: { id: batchId } }))!;
    const before = (await chunksOf(outputId)).map((c) => c.sealed);
    expect(await finishBatch(t.deps.db, batchPortsOf(t.deps.ports.inference), row, 'a-worker-that-lost-it', new Date(t.clock.now()), 'completed')).toBeNull();
    expect((await chunksOf(outputId)).map((c) => c.sealed)).toEqual(before);
    expect(Buffer.compare((await content(s.secret, outputId)).raw, out.raw)).toBe(0);
  });

  it('DELETE drops the chunks at once; a zero-retention project serves no content (404 record_not_retained) and the purge drops its chunks', { timeout: 120_000 }, async () => {
    const s = await seedProject(operator, { scopes: SCOPES });
    const api = client(t.app, s.secret);
    const line = JSON.stringify({ custom_id: 'a', method: 'POST', url: '/v1/chat/completions', body: { model: 'mock-1', messages: [{ role: 'user', content: 'hi' }] } });
    const gone = await upload(s.secret, Buffer.from(line));
    expect(await chunksOf(gone.body.id)).toHaveLength(1);
    expect((await api.delete(`/v1/files/${gone.body.id}`)).status).toBe(200);
    expect(await chunksOf(gone.body.id)).toHaveLength(0);

    const kept = await upload(s.secret, Buffer.from(line));
    expect((await content(s.secret, kept.body.id)).status).toBe(200);
    expect((await api.put(`/v1/projects/${s.projectId}/retention`, { mode: 'zero' })).status).toBe(200);
    expectError(await content(s.secret, kept.body.id), 404, 'record_not_retained', 'file_id');
    expect(await purgeExpiredRetention(t.deps)).toBeGreaterThanOrEqual(1);
    expect(await chunksOf(kept.body.id)).toHaveLength(0);
    expect((await api.get(`/v1/files/${kept.body.id}`)).status).toBe(200);
  });

  it("the retention purge drops the chunks of input and output files past the project's retention", { timeout: 120_000 }, async () => {
    const s = await seedProject(operator, { scopes: SCOPES });
    const api = client(t.app, s.secret);
    expect((await api.put(`/v1/projects/${s.projectId}/retention`, { mode: 'standard', days: 1 })).status).toBe(200);
    const line = JSON.stringify({ custom_id: 'a', method: 'POST', url: '/v1/chat/completions', body: { model: 'mock-1', messages: [{ role: 'user', content: 'hi' }] } });
    const f = await upload(s.secret, Buffer.from(line));
    const b = await api.post('/v1/batches', { input_file_id: f.body.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    await new BatchRunner(t.deps, { sleep: async (ms) => t.clock.advance(ms) }).runPending();
    const done = (await api.get(`/v1/batches/${b.body.id}`)).body;
    expect(done.status).toBe('completed');
    expect(await chunksOf(done.output_file_id)).toHaveLength(1);
    expect(await purgeExpiredRetention(t.deps)).toBe(0);

    t.clock.advance(2 * 86_400_000);
    expect(await purgeExpiredRetention(t.deps)).toBeGreaterThanOrEqual(2);
    for (const id of [f.body.id, done.output_file_id]) {
      expect(await chunksOf(id)).toHaveLength(0);
      expectError(await content(s.secret, id), 404, 'record_not_retained', 'file_id');
    }
  });
});
