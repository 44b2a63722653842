/**
 * node --import tsx bench/rag.ts — RAG indexing throughput and query latency (docs/guide/rag.md). Writes the `rag`
 * member of bench/results.json (and results.md again).
 *
 * For each database (embedded PGlite in a temporary directory, as SVC_DATA_DIR runs it; PostgreSQL at DATABASE_URL, default the local one, in a throw-away
 * schema) and each size (default 10,000 then 100,000 chunks, reached by adding documents): uploads documents of 100
 * chunks of generated text through POST /v1/rag/documents, runs the indexing job (chunking, embeddings with the
 * built-in mock-embed-1 through the inference pipeline, tsvector, one transaction per document) and reports chunks/s;
 * then POST /v1/rag/query in keyword, vector and hybrid mode (top_k 5), p50/p99 over BENCH_RAG_QUERIES (200) each,
 * after one warm-up query (the first vector query of a version loads the project's matrix), once rag_chunks is analyzed.
 *
 * Env: DATABASE_URL, BENCH_RAG_SIZES (10000,100000), BENCH_RAG_QUERIES (200), BENCH_RAG_BACKENDS (pglite,postgres),
 * BENCH_RAG_KEEP=1 (PostgreSQL: keep the schema, named on stderr, to study the queries with EXPLAIN).
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import os from 'node:os';
import pino from 'pino';
import { createDeps } from '../src/app-deps.ts';
import { loadConfig } from '../src/config/config.ts';
import { openDatabase, type Database } from '../src/db/client.ts';
import { applyMigrations } from '../src/db/migrations.ts';
import { buildApp } from '../src/api/app.ts';
import { writeMember } from './results-file.ts';
import { indexDueDocuments } from '../src/jobs/rag-indexing/worker.ts';
import { yieldToEventLoop } from '../src/jobs/sweep.ts';
import { CHUNK_CHARS, CHUNK_OVERLAP } from '../src/domain/rag/chunking.ts';

const SIZES = (process.env.BENCH_RAG_SIZES ?? '10000,100000').split(',').map(Number);
const QUERIES = Number(process.env.BENCH_RAG_QUERIES ?? 200);
const BACKENDS = (process.env.BENCH_RAG_BACKENDS ?? 'pglite,postgres').split(',');
const PG_URL = process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/postgres';
const MASTER = `svc_sk_bench_${randomBytes(16).toString('hex')}`;
const CHUNKS_PER_DOC = 100;

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

// A deterministic vocabulary of 20,000 pseudo-words, drawn with a skew (a few common, most rare), as in real text.
let seed = 42;
const rand = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
const SYL = ['ka', 'lo', 'mi', 'ne', 'ru', 'sa', 'ti', 'vo', 'be', 'da', 'fu', 'gi', 'ho', 'ju', 'pe', 'qui', 'ra', 'so', 'tu', 'ze'];
const VOCAB = Array.from({ length: 20_000 }, () => Array.from({ length: 2 + Math.floor(rand() * 3) }, () => SYL[Math.floor(rand() * SYL.length)]).join(''));
const word = () => VOCAB[Math.floor(VOCAB.length * Math.pow(rand(), 3))]!;
function paragraph(chars: number): string {
  let s = '';
  while (s.length < chars) s += (s ? ' ' : '') + word() + (rand() < 0.08 ? '.' : '');
  return s;
}
/** About CHUNKS_PER_DOC chunks once cut: each chunk moves the start on by CHUNK_CHARS - CHUNK_OVERLAP at most. */
const documentText = () => paragraph(CHUNKS_PER_DOC * (CHUNK_CHARS - CHUNK_OVERLAP) * 0.98);

async function openBackend(kind: string): Promise<{ database: Database; url: string | null; drop(): Promise<void> }> {
  if (kind === 'pglite') {
    // On disk, as the embedded default (SVC_DATA_DIR) runs; BENCH_RAG_PGLITE_MEMORY=1 keeps it in memory.
    const dataDir = process.env.BENCH_RAG_PGLITE_MEMORY === '1' ? null : await mkdtemp(join(tmpdir(), 'bench-rag-'));
    const database = await openDatabase({ databaseUrl: null, dataDir });
    await applyMigrations({ kind: 'pglite', pglite: database.pglite! });
    return {
      database,
      url: null,
      drop: async () => {
        await database.close();
        if (dataDir) await rm(dataDir, { recursive: true, force: true });
      },
    };
  }
  const schema = `bench_rag_${randomBytes(4).toString('hex')}`;
  const u = new URL(PG_URL);
  u.searchParams.set('schema', schema);
  const url = u.toString();
  await applyMigrations({ kind: 'postgres', url });
  const database = await openDatabase({ databaseUrl: url, dataDir: null, poolSize: 10 });
  return {
    database,
    url,
    drop: async () => {
      await database.close();
      if (process.env.BENCH_RAG_KEEP === '1') return void console.error(`kept schema ${schema}`);
      const pg = (await import('pg')).default;
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await c.end();
    },
  };
}

async function run(kind: string): Promise<Record<string, unknown>[]> {
  const backend = await openBackend(kind);
  const config = loadConfig({
    SVC_MASTER_KEY: MASTER,
    SVC_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
    LOG_LEVEL: 'warn',
    SVC_BODY_LIMIT_BYTES: String(10 * 1_048_576),
    ...(backend.url ? { DATABASE_URL: backend.url } : {}),
  });
  const deps = await createDeps(config, { database: backend.database, log: pino({ level: 'warn' }) });
  const app = await buildApp(deps);
  await app.ready();
  const call = async (method: 'POST' | 'PUT', url: string, body: unknown, key = MASTER) => {
    const res = await app.inject({ method, url, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, payload: JSON.stringify(body) });
    if (res.statusCode !== 200) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body.slice(0, 300)}`);
    return JSON.parse(res.body);
  };
  const project = await call('POST', '/v1/projects', { name: `bench-${kind}`, plan: 'enterprise' });
  const limits = { requests_per_minute: 1_000_000, tokens_per_minute: 1_000_000_000, burst: 0 };
  await call('PUT', `/v1/projects/${project.id}/rate-limits`, limits);
  const key = await call('POST', '/v1/keys', { project_id: project.id, name: 'bench', scopes: ['rag:write', 'inference:write'] });
  await call('PUT', `/v1/projects/${project.id}/rag`, { embedding_model: 'mock-embed-1' }, key.secret);

  const rows: Record<string, unknown>[] = [];
  let indexed = 0;
  for (const size of SIZES) {
    const docs = Math.ceil((size - indexed) / CHUNKS_PER_DOC);
    for (let i = 0; i < docs; i++) {
      await call('POST', '/v1/rag/documents', { name: `doc ${indexed / CHUNKS_PER_DOC + i}`, content: documentText() }, key.secret);
      await yieldToEventLoop(); // as uploads over HTTP would: inject() alone never leaves the microtask queue
    }
    const started = performance.now();
    const done = await indexDueDocuments(deps, { leaseMs: 3_600_000 });
    const seconds = (performance.now() - started) / 1000;
    // The statistics a bulk load leaves for the planner: autovacuum's analyze (PostgreSQL) or the embedded database's
    // maintenance (db/pglite-maintenance.ts) has them within a minute; the bench does not wait for it.
    await deps.db.$executeRawUnsafe('ANALYZE rag_chunks');
    const chunks = await deps.db.ragChunk.count({ where: { projectId: project.id } });
    const added = chunks - indexed;
    indexed = chunks;
    if (done.some((d) => d.outcome !== 'ready')) throw new Error(`indexing: ${JSON.stringify(done.filter((d) => d.outcome !== 'ready').slice(0, 3))}`);
    const row: Record<string, unknown> = { backend: kind, chunks, indexing_chunks_per_s: Math.round(added / seconds) };
    for (const mode of ['keyword', 'vector', 'hybrid']) {
      const ms: number[] = [];
      const q = () => `${word()} ${word()} ${word()}`;
      await call('POST', '/v1/rag/query', { query: q(), mode, top_k: 5 }, key.secret);
      for (let i = 0; i < QUERIES; i++) {
        const t0 = performance.now();
        await call('POST', '/v1/rag/query', { query: q(), mode, top_k: 5 }, key.secret);
        ms.push(performance.now() - t0);
      }
      ms.sort((a, b) => a - b);
      row[`${mode}_p50_ms`] = +pct(ms, 50).toFixed(1);
      row[`${mode}_p99_ms`] = +pct(ms, 99).toFixed(1);
    }
    console.log(JSON.stringify(row));
    rows.push(row);
  }
  await app.close();
  await deps.outcomes.close();
  await backend.drop();
  return rows;
}

async function main(): Promise<void> {
  const all: Record<string, unknown>[] = [];
  for (const kind of BACKENDS) all.push(...(await run(kind)));
  console.log('\n| backend | chunks | indexing chunks/s | keyword p50 / p99 ms | vector p50 / p99 ms | hybrid p50 / p99 ms |');
  console.log('|---|---|---|---|---|---|');
  for (const r of all) {
    console.log(
      `| ${r.backend} | ${r.chunks} | ${r.indexing_chunks_per_s} | ${r.keyword_p50_ms} / ${r.keyword_p99_ms} | ${r.vector_p50_ms} / ${r.vector_p99_ms} | ${r.hybrid_p50_ms} / ${r.hybrid_p99_ms} |`,
    );
  }
  writeMember('rag', {
    date: new Date().toISOString(),
    machine: `${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown'}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}; load average at the end ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}`,
    queries_per_mode: QUERIES,
    top_k: 5,
    embedding: 'mock-embed-1, 256 dimensions',
    rows: all,
  });
  process.exit(0);
}

void main();
