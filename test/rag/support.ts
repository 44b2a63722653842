import type { FastifyInstance } from 'fastify';
import type { TestApp } from '../helpers/app.ts';
import { indexDueDocuments } from '../../src/jobs/rag-indexing/worker.ts';

export const RAG_SCOPES = ['rag:write', 'inference:write', 'usage:read', 'audit:read'];

/** Runs the background indexing as the worker would, until nothing is due. */
export function indexNow(t: TestApp, leaseMs = 60_000) {
  return indexDueDocuments(t.deps, { leaseMs });
}

/** A multipart/form-data body with one file and text fields, as curl -F sends it. */
export function multipart(file: { name: string; type: string; data: Buffer | string }, fields: Record<string, string> = {}) {
  const boundary = `----svc${Math.random().toString(16).slice(2)}`;
  const parts: Buffer[] = [];
  for (const [k, v] of Object.entries(fields)) {
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`));
  }
  parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${file.name}"\r\nContent-Type: ${file.type}\r\n\r\n`));
  parts.push(Buffer.isBuffer(file.data) ? file.data : Buffer.from(file.data));
  parts.push(Buffer.from(`\r\n--${boundary}--\r\n`));
  return { payload: Buffer.concat(parts), contentType: `multipart/form-data; boundary=${boundary}` };
}

export async function uploadFile(
  app: FastifyInstance,
  key: string,
  file: { name: string; type: string; data: Buffer | string },
  fields: Record<string, string> = {},
  headers: Record<string, string> = {},
) {
  const { payload, contentType } = multipart(file, fields);
  const res = await app.inject({ method: 'POST', url: '/v1/rag/documents', headers: { authorization: `Bearer ${key}`, 'content-type': contentType, ...headers }, payload });
  let body: any = null;
  try {
    body = JSON.parse(res.body);
  } catch {
    body = null;
  }
  return { status: res.statusCode, headers: res.headers, body, raw: res.body };
}
