import type { FastifyPluginAsync } from 'fastify';
import { API_REFERENCE_PATH, OPENAPI_PATH } from './openapi.ts';

export interface HomeLinks {
  admin: string;
  graphql: string;
  graphiql: string | null;
  api_reference: string;
  openapi: string;
  errors: string;
  health: string;
  metrics: string | null;
}

const escape = (s: string) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);

export function renderHome(version: string, links: HomeLinks): string {
  const item = (href: string | null, title: string, what: string) =>
    href ? `<li><a href="${escape(href)}">${escape(title)}</a> <span>${escape(what)}</span></li>` : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>svc gateway</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="/favicon.ico">
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:44rem;margin:3rem auto;padding:0 1rem;color:#1b1b1b}h1{margin-bottom:.2rem}
p.v{color:#707070;margin-top:0}ul{list-style:none;padding:0}li{padding:.55rem 0;border-bottom:1px solid #e5e5e5}
a{font-weight:600;color:#0b57d0}span{color:#555;display:block;font-size:14px}code{font-size:90%}</style>
</head><body>
<h1>svc gateway</h1><p class="v">version ${escape(version)}</p>
<ul>
${item(links.admin, 'Admin console', 'Projects, keys, limits, webhooks and usage, over GraphQL with your key.')}
${item(links.graphiql, 'GraphiQL', 'Write and run GraphQL queries against /graphql (type your key in the headers editor).')}
${item(links.api_reference, 'API reference', 'Every REST route under /v1, generated from the route schemas.')}
${item(links.openapi, 'OpenAPI document', 'OpenAPI 3.1, to generate a client.')}
${item(links.errors, 'Error codes', 'Every error code, its HTTP status and whether to retry.')}
${item(links.health, 'Health', 'Liveness; /readyz for readiness.')}
</ul>
<p>API calls: <code>Authorization: Bearer svc_sk_…</code> on <code>/v1/…</code> and <code>/graphql</code>.</p>
</body></html>`;
}

/**
 * GET /: a small page for a browser, the same links as JSON for an API client (by Accept: text/html asks for the page).
 */
export function homeRoutes(version: string, links: HomeLinks): FastifyPluginAsync {
  const html = renderHome(version, links);
  return async (app) => {
    app.get('/', { config: { action: 'public' }, schema: { hide: true } }, async (req, reply) => {
      if ((req.headers.accept ?? '').includes('text/html')) return reply.type('text/html; charset=utf-8').send(html);
      return { object: 'svc.gateway', version, links };
    });
  };
}

export const HOME_LINKS = (production: boolean, metrics: boolean): HomeLinks => ({
  admin: '/admin',
  graphql: '/graphql',
  graphiql: production ? null : '/graphiql',
  api_reference: `${API_REFERENCE_PATH}/`,
  openapi: OPENAPI_PATH,
  errors: '/docs/errors',
  health: '/healthz',
  metrics: metrics ? '/metrics' : null,
});
