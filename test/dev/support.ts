import { expect } from 'vitest';
import type { Client, TestApp } from '../helpers/app.ts';
import { indexDueDocuments } from '../../src/jobs/rag-indexing/worker.ts';

/** A Dev key as spec §5.6 says: dev:write plus inference:write. */
export const DEV = ['dev:write', 'inference:write'];

/** A small repository: a payments module, its README, and an unrelated helper. */
export const FILES = [
  {
    path: 'src/payments/refund.ts',
    content:
      'export function refundAmount(total: number, fee: number): number {\n  // Refunds keep the processing fee.\n  if (total < fee) throw new Error("refund below fee");\n  return total - fee;\n}\n',
  },
  { path: 'README.md', content: '# Shop\n\nRefunds are processed by src/payments/refund.ts and keep the card processing fee.\n' },
  { path: 'src/util/strings.ts', content: 'export const slug = (s: string) => s.toLowerCase().replace(/\\s+/g, "-");\n' },
];

export const DIFF = [
  'diff --git a/src/payments/refund.ts b/src/payments/refund.ts',
  '--- a/src/payments/refund.ts',
  '+++ b/src/payments/refund.ts',
  '@@ -1,5 +1,5 @@',
  ' export function refundAmount(total: number, fee: number): number {',
  '-  if (total < fee) throw new Error("refund below fee");',
  '+  if (total <= 0) return 0;',
  '   return total - fee;',
  ' }',
].join('\n');

/** Runs the RAG indexing worker until nothing is due (the repository's files are RAG documents). */
export function indexNow(t: TestApp) {
  return indexDueDocuments(t.deps, { leaseMs: 60_000 });
}

/** A repository with FILES posted and indexed: status ready. */
export async function readyRepository(t: TestApp, api: Client, body: Record<string, unknown> = {}) {
  const repo = await api.post('/v1/dev/repositories', { name: 'acme/shop', git_host: 'github', ...body });
  expect(repo.status, repo.raw).toBe(200);
  const posted = await api.post(`/v1/dev/repositories/${repo.body.id}/files`, { files: FILES });
  expect(posted.status, posted.raw).toBe(200);
  await indexNow(t);
  const ready = await api.get(`/v1/dev/repositories/${repo.body.id}`);
  expect(ready.body.status, ready.raw).toBe('ready');
  return ready.body as { id: string; project_id: string; [k: string]: unknown };
}
