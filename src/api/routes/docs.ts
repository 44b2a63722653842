import type { FastifyPluginAsync } from 'fastify';
import { CATALOG, CatalogBody, type Catalog } from '../../domain/auth/catalog.ts';
import { ERRORS } from '../../errors/codes.ts';

const escape = (s: string) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);

/** Generated from the error table, so the page cannot drift from the codes the gateway returns. */
export function renderErrorDocs(): string {
  const rows = Object.entries(ERRORS)
    .map(
      ([code, e]) =>
        `<tr id="${code}"><td><a href="#${code}">${code}</a></td><td>${e.http}</td><td>${escape(e.retryable)}</td><td>${escape(e.message)}</td></tr>`,
    )
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Errors · svc gateway</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;padding:.4rem;text-align:left}tr:target{background:#fff6cc}code{font-size:90%}</style>
</head><body>
<h1>Errors</h1>
<p>Every failed request returns <code>{"error": {"type": "svc.error", "code", "message", "request_id", "doc_url", "param"}}</code>
and the header <code>X-Svc-Request-Id</code>, equal to <code>error.request_id</code>. Retry only where the table says yes,
with backoff 250 ms, 1 s, 4 s; on 429 honour <code>Retry-After</code> and <code>X-Svc-RateLimit-Reset</code>.</p>
<table><thead><tr><th>Code</th><th>HTTP</th><th>Retry</th><th>Meaning</th></tr></thead><tbody>
${rows}
</tbody></table></body></html>`;
}

export const presentCatalog = (catalog: Catalog = CATALOG): CatalogBody => ({
  object: 'svc.catalog',
  scopes: [...catalog.scopes],
  events: [...catalog.events],
  actions: Object.fromEntries(Object.entries(catalog.actions).map(([action, scopes]) => [action, [...scopes]])),
});

export const docsRoutes: FastifyPluginAsync = async (app) => {
  const html = renderErrorDocs();
  app.get('/docs/errors', { config: { action: 'public' } }, async (_req, reply) => reply.type('text/html; charset=utf-8').send(html));
  // The tables themselves, for clients that show them (the admin console): any valid key.
  const catalog = presentCatalog();
  app.get('/v1/catalog', { config: { action: 'catalog.read' }, schema: { response: { 200: CatalogBody } } }, async () => catalog);
};
