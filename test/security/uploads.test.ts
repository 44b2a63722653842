/**
 * Issue 36, hostile uploads: a PDF bomb, JSON bodies larger than the caller's plan, deeply nested HTML, a truncated
 * multipart body, and a 413 that Node's fetch must be able to read. Each hostile request runs while /healthz is probed:
 * the gateway keeps answering within 500 ms.
 */
import { execFile } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { deflateSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { extractDocumentText } from '../../src/domain/rag/extract.ts';
import { multipart, RAG_SCOPES, uploadFile } from '../rag/support.ts';

let t: TestApp;
let operator: Client;
let base: string;
let starter: { projectId: string; secret: string };

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  starter = await seedProject(operator, { scopes: [...RAG_SCOPES, 'legal:write', 'keys:manage', 'dev:write'], plan: 'starter' });
});
afterAll(async () => {
  await t?.close();
});

const MB = 1024 * 1024;

/** A one-page PDF whose only content stream is `content`, FlateDecode-compressed. */
function pdfWithContent(content: Buffer): Buffer {
  const stream = deflateSync(content, { level: 9 });
  const objects: (string | null)[] = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>',
    null,
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
  ];
  const parts: Buffer[] = [Buffer.from('%PDF-1.4\n')];
  const offsets: number[] = [];
  let length = parts[0]!.length;
  objects.forEach((o, i) => {
    offsets.push(length);
    const part =
      o === null
        ? Buffer.concat([Buffer.from(`${i + 1} 0 obj\n<< /Length ${stream.length} /Filter /FlateDecode >>\nstream\n`), stream, Buffer.from('\nendstream\nendobj\n')])
        : Buffer.from(`${i + 1} 0 obj\n${o}\nendobj\n`);
    parts.push(part);
    length += part.length;
  });
  parts.push(
    Buffer.from(
      `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`).join('')}` +
        `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${length}\n%%EOF\n`,
    ),
  );
  return Buffer.concat(parts);
}

/** `bytes` of one text-drawing operator repeated: about a quarter of it is text once extracted. */
function textBomb(bytes: number): Buffer {
  const op = Buffer.from('BT /F1 12 Tf 72 712 Td (Hello world) Tj ET\n');
  const out = Buffer.alloc(bytes, 0x20);
  for (let i = 0; i + op.length <= bytes; i += op.length) op.copy(out, i);
  return pdfWithContent(out);
}

const healthz = () => t.app.inject({ method: 'GET', url: '/healthz' });
const healthzOverHttp = () => fetch(`${base}/healthz`).then(async (r) => ({ statusCode: r.status, body: await r.text() }));

/**
 * Runs `hostile` and probes /healthz back to back until it settles (every 20 ms): the slowest probe (its wait for the
 * event loop included) is what a load balancer would have seen.
 */
async function whileRunning<T>(hostile: () => Promise<T>, probe: () => Promise<{ statusCode: number }> = healthz) {
  let settled = false;
  const started = performance.now();
  const running = hostile().finally(() => (settled = true));
  const latencies: number[] = [];
  do {
    const s = performance.now();
    await new Promise((r) => setTimeout(r, 20));
    const res = await probe();
    expect(res.statusCode).toBe(200);
    latencies.push(performance.now() - s - 20);
  } while (!settled);
  const result = await running;
  return { result, maxLatencyMs: Math.max(...latencies), probes: latencies.length, elapsedMs: performance.now() - started };
}

const report = (what: string, figures: Record<string, number>) =>
  console.info(`[uploads] ${what}: ${Object.entries(figures).map(([k, v]) => `${k}=${Math.round(v)}`).join(' ')}`);

describe('PDF bomb', () => {
  it('refuses a FlateDecode stream that inflates past the plan limit with 413, the gateway answering meanwhile', async () => {
    const bomb = textBomb(20_000_000); // ~60 KB of PDF, 20 MB of content stream, ~5 MB of text
    expect(bomb.length).toBeLessThan(100_000);
    const rssBefore = process.memoryUsage().rss;
    const { result: res, maxLatencyMs, elapsedMs, probes } = await whileRunning(() =>
      uploadFile(t.app, starter.secret, { name: 'bomb.pdf', type: 'application/pdf', data: bomb }),
    );
    report('pdf bomb (rag)', { elapsedMs, maxLatencyMs, probes, rssBeforeMb: rssBefore / MB, rssAfterMb: process.memoryUsage().rss / MB });
    expectError(res, 413, 'document_too_large', 'file');
    expect(res.body.error.message).toMatch(/1 MB/);
    expect(maxLatencyMs).toBeLessThan(500);
    expect(await t.deps.db.ragDocument.count({ where: { projectId: starter.projectId } })).toBe(0);
  });

  it('refuses it as a Legal contract too (the same extractor)', async () => {
    const api = client(t.app, starter.secret);
    const matter = await api.post('/v1/legal/matters', { name: 'Bomb', client: 'Mallory' });
    expect(matter.status, matter.raw).toBe(200);
    const { payload, contentType } = multipart({ name: 'bomb.pdf', type: 'application/pdf', data: textBomb(20_000_000) });
    const { result: res, maxLatencyMs } = await whileRunning(() =>
      t.app.inject({
        method: 'POST',
        url: `/v1/legal/matters/${matter.body.id}/contracts`,
        headers: { authorization: `Bearer ${starter.secret}`, 'content-type': contentType },
        payload,
      }),
    );
    expectError({ status: res.statusCode, headers: res.headers, body: res.json() }, 413, 'document_too_large', 'file');
    expect(maxLatencyMs).toBeLessThan(500);
  });

  it('refuses a stream that inflates to 200 MB of blanks (no text, but pdf.js would hold it all) with 413', async () => {
    const bomb = pdfWithContent(Buffer.alloc(200_000_000, 0x20));
    const rssBefore = process.memoryUsage().rss;
    const { result: res, maxLatencyMs, elapsedMs } = await whileRunning(() =>
      uploadFile(t.app, starter.secret, { name: 'blank.pdf', type: 'application/pdf', data: bomb }),
    );
    report('pdf 200 MB of blanks', { pdfKb: bomb.length / 1024, elapsedMs, maxLatencyMs, rssBeforeMb: rssBefore / MB, rssAfterMb: process.memoryUsage().rss / MB });
    expectError(res, 413, 'document_too_large', 'file');
    expect(res.body.error.message).toMatch(/inflate/);
    expect(maxLatencyMs).toBeLessThan(500);
  });

  it('stops an extraction at its deadline (400) and survives a worker out of memory (413)', async () => {
    const bomb = textBomb(20_000_000);
    await expect(extractDocumentText('application/pdf', bomb, 'file', { maxTextBytes: 1024 * MB, deadlineMs: 50 })).rejects.toMatchObject({
      code: 'invalid_request',
      param: 'file',
      message: expect.stringMatching(/within/),
    });
    // No text cap to stop it (and a small heap, to get there sooner): the worker runs out of memory, the process does not.
    const { result, maxLatencyMs, elapsedMs } = await whileRunning(() =>
      extractDocumentText('application/pdf', textBomb(100_000_000), 'file', { maxTextBytes: 1024 * MB, deadlineMs: 60_000, heapMb: 32 }).catch((e: unknown) => e),
    );
    report('worker out of memory', { elapsedMs, maxLatencyMs });
    expect(result).toMatchObject({ code: 'document_too_large', param: 'file' });
    expect(maxLatencyMs).toBeLessThan(500);
    expect((await healthz()).statusCode).toBe(200);
    // Extraction carries on: an ordinary PDF is read, a malformed one is 400 invalid_request.
    const ok = await uploadFile(t.app, starter.secret, { name: 'ok.pdf', type: 'application/pdf', data: pdfWithContent(Buffer.from('BT /F1 12 Tf 72 712 Td (Quarterly revenue grew) Tj ET\n')) });
    expect(ok.status, ok.raw).toBe(200);
    const bad = await uploadFile(t.app, starter.secret, { name: 'bad.pdf', type: 'application/pdf', data: Buffer.from('%PDF-1.4\nnot really a pdf') });
    expectError(bad, 400, 'invalid_request', 'file');
  });
});

describe('JSON uploads are bounded by the caller’s plan before they are read', () => {
  /** Sends headers and the first `sent` bytes of a body declared `declared` bytes long; resolves with the answer. */
  function partialPost(path: string, declared: number | null, sent: number, timeoutMs: number) {
    return new Promise<{ status: number; body: any; bytesSentBeforeAnswer: number }>((resolve, reject) => {
      const req = httpRequest(`${base}${path}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${starter.secret}`,
          'content-type': 'application/json',
          ...(declared !== null ? { 'content-length': String(declared) } : {}),
        },
      });
      let written = 0;
      const timer = setTimeout(() => {
        req.destroy();
        reject(new Error(`no answer within ${timeoutMs} ms after ${written} bytes: the server is waiting for the whole body`));
      }, timeoutMs);
      req.on('response', (res) => {
        const bytesSentBeforeAnswer = written;
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          clearTimeout(timer);
          req.destroy();
          resolve({ status: res.statusCode!, body: JSON.parse(Buffer.concat(chunks).toString()), bytesSentBeforeAnswer });
        });
      });
      req.on('error', () => {});
      const chunk = Buffer.from(`{"name":"big","content":"${'a'.repeat(64 * 1024 - 26)}`);
      const pump = () => {
        while (written < sent) {
          written += chunk.length;
          if (!req.write(chunk)) return void req.once('drain', pump);
        }
      };
      pump();
    });
  }

  it('answers a declared Content-Length over the plan with 413 before the body is sent', async () => {
    const res = await partialPost('/v1/rag/documents', 50 * MB, 256 * 1024, 5_000);
    expect(res.status).toBe(413);
    expect(res.body.error).toMatchObject({ code: 'document_too_large', param: 'content' });
    expect(res.body.error.message).toMatch(/starter/);
  });

  it('answers a chunked body with 413 once it streams past the plan, without waiting for its end', async () => {
    // The body never ends: an answer at all shows the server did not wait for it.
    const res = await partialPost('/v1/rag/documents', null, 40 * MB, 10_000);
    expect(res.status).toBe(413);
    expect(res.body.error).toMatchObject({ code: 'document_too_large', param: 'content' });
    expect(res.bytesSentBeforeAnswer).toBeLessThan(40 * MB);
  });

  it('bounds the Legal contract upload and the Dev routes the same way (their own codes)', async () => {
    const matter = await client(t.app, starter.secret).post('/v1/legal/matters', { name: 'Big', client: 'Mallory' });
    const legal = await partialPost(`/v1/legal/matters/${matter.body.id}/contracts`, 50 * MB, 128 * 1024, 5_000);
    expect(legal.status).toBe(413);
    expect(legal.body.error).toMatchObject({ code: 'document_too_large', param: 'content' });
    // Dev files: ten of the plan's documents per call (starter 11 MB); a diff: twice the plan's cap plus 1 MB (1.4 MB).
    const files = await partialPost('/v1/dev/repositories/rep_any/files', 20 * MB, 128 * 1024, 5_000);
    expect(files.status).toBe(413);
    expect(files.body.error).toMatchObject({ code: 'document_too_large', param: 'files' });
    const review = await partialPost('/v1/dev/reviews', 5 * MB, 128 * 1024, 5_000);
    expect(review.status).toBe(409);
    expect(review.body.error).toMatchObject({ code: 'diff_too_large', param: 'diff' });
  });

  it('survives three parallel 50 MB bodies from a starter key: three 413s, /healthz fast', async () => {
    const rssBefore = process.memoryUsage().rss;
    // The client in another process: building and sending 150 MB would otherwise stall this event loop, not the server's.
    const script = `
      const [base, key] = process.argv.slice(1);
      const body = JSON.stringify({ name: 'huge', content: 'x'.repeat(50 * 1024 * 1024) });
      const send = () => fetch(base + '/v1/rag/documents', { method: 'POST', headers: { authorization: 'Bearer ' + key, 'content-type': 'application/json' }, body })
        .then(async (r) => ({ status: r.status, body: await r.json() }), (e) => ({ error: String(e.cause ?? e) }));
      console.log(JSON.stringify(await Promise.all([send(), send(), send()])));`;
    const { result, maxLatencyMs, elapsedMs } = await whileRunning(
      () => promisify(execFile)(process.execPath, ['--input-type=module', '-e', script, base, starter.secret], { maxBuffer: 1024 * 1024 }),
    );
    report('3 x 50 MB JSON (starter)', { elapsedMs, maxLatencyMs, rssBeforeMb: rssBefore / MB, rssAfterMb: process.memoryUsage().rss / MB });
    const answers = JSON.parse(result.stdout) as { status: number; body: any }[];
    expect(answers).toHaveLength(3);
    for (const r of answers) {
      expect(r.status).toBe(413);
      expect(r.body.error).toMatchObject({ code: 'document_too_large', param: 'content' });
    }
    expect(maxLatencyMs).toBeLessThan(500);
    // Within the plan, JSON escapes included, a body is still read: 0.9 MB of content is 1.8 MB of JSON.
    const lines = await client(t.app, starter.secret).post('/v1/rag/documents', { name: 'lines', content: '\n'.repeat(900 * 1024) + 'text' });
    expect(lines.status, lines.raw).toBe(200);
  });
});

describe('deeply nested HTML', () => {
  const deep = '<table><tr><td>'.repeat(20_000) + 'cell';

  it('REST: 400 invalid_request naming content, at once, the gateway answering meanwhile', async () => {
    const api = client(t.app, starter.secret);
    const { result: res, maxLatencyMs, elapsedMs } = await whileRunning(() => api.post('/v1/rag/documents', { name: 'deep', content: deep, content_type: 'text/html' }));
    report('deep html (rest)', { elapsedMs, maxLatencyMs });
    expectError(res, 400, 'invalid_request', 'content');
    expect(res.body.error.message).toMatch(/nest/i);
    expect(maxLatencyMs).toBeLessThan(500);
    expect(elapsedMs).toBeLessThan(2_000);
    // Ordinary nesting, a script comparing with "<", still converts (in the worker).
    const html = `<html><body>${'<div>'.repeat(100)}<p>Nested <b>text</b> survives.</p>${'</div>'.repeat(100)}<script>if (a<b) x()</script></body></html>`;
    const ok = await api.post('/v1/rag/documents', { name: 'nested', content: html, content_type: 'text/html' });
    expect(ok.status, ok.raw).toBe(200);
  });

  it('REST multipart: the same, naming file', async () => {
    const { result: res, maxLatencyMs } = await whileRunning(() => uploadFile(t.app, starter.secret, { name: 'deep.html', type: 'text/html', data: deep }));
    expectError(res, 400, 'invalid_request', 'file');
    expect(maxLatencyMs).toBeLessThan(500);
  });

  it('GraphQL uploadDocument: the same', async () => {
    const { result: res, maxLatencyMs } = await whileRunning(() =>
      t.app.inject({
        method: 'POST',
        url: '/graphql',
        headers: { authorization: `Bearer ${starter.secret}`, 'content-type': 'application/json' },
        payload: {
          query: 'mutation($c: String!) { uploadDocument(name: "deep", content: $c, contentType: "text/html") { id } }',
          variables: { c: deep },
        },
      }),
    );
    const body = res.json();
    expect(body.errors?.[0]?.extensions).toMatchObject({ code: 'invalid_request', param: 'content' });
    expect(maxLatencyMs).toBeLessThan(500);
  });
});

describe('a truncated multipart body', () => {
  it('is 400 invalid_request, not 500', async () => {
    const { payload, contentType } = multipart({ name: 'a.txt', type: 'text/plain', data: 'some text that never ends '.repeat(100) });
    const cut = payload.subarray(0, payload.length - 200);
    const res = await t.app.inject({ method: 'POST', url: '/v1/rag/documents', headers: { authorization: `Bearer ${starter.secret}`, 'content-type': contentType }, payload: cut });
    expectError({ status: res.statusCode, headers: res.headers, body: res.json() }, 400, 'invalid_request');
  });
});

describe('a 413 reaches Node fetch', () => {
  /**
   * POSTs JSON bodies with Node's global fetch from another process (in this one the client would write the whole body
   * before the server even reads the request: the race needs two event loops).
   */
  async function fetchFromAnotherProcess(path: string, sizesMb: number[], field: string) {
    const script = `
      const [base, key, path, field, sizes] = process.argv.slice(1);
      const out = [];
      for (const mb of JSON.parse(sizes)) {
        try {
          const res = await fetch(base + path, { method: 'POST', headers: { authorization: 'Bearer ' + key, 'content-type': 'application/json' },
            body: JSON.stringify({ name: 'k', [field]: 'x'.repeat(mb * 1024 * 1024) }) });
          out.push({ status: res.status, requestId: res.headers.get('x-svc-request-id'), body: await res.json() });
        } catch (e) { out.push({ error: String(e.cause ?? e) }); }
      }
      console.log(JSON.stringify(out));`;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script, base, starter.secret, path, field, JSON.stringify(sizesMb)]);
    return JSON.parse(stdout) as { status?: number; requestId?: string; body?: any; error?: string }[];
  }

  it('answers 5 MB JSON bodies to POST /v1/keys with a readable 413 error object, every time', async () => {
    const answers = await fetchFromAnotherProcess('/v1/keys', [5, 5, 5, 5, 20], 'padding');
    for (const a of answers) {
      expect(a.error).toBeUndefined();
      expect(a.status).toBe(413);
      expect(a.body.error).toMatchObject({ code: 'invalid_request', type: 'svc.error' });
      expect(a.requestId).toBe(a.body.error.request_id);
    }
  });

  it('answers the upload route’s 413 to fetch as well', async () => {
    const answers = await fetchFromAnotherProcess('/v1/rag/documents', [5, 5, 20], 'content');
    for (const a of answers) {
      expect(a.error).toBeUndefined();
      expect(a.status).toBe(413);
      expect(a.body.error).toMatchObject({ code: 'document_too_large', param: 'content' });
    }
  });
});
