import { existsSync } from 'node:fs';
import path from 'node:path';
import fastifyStatic from '@fastify/static';
import type { FastifyPluginAsync } from 'fastify';
import { PROJECT_ROOT } from '../../project-root.ts';
import { publicRoutes } from '../hooks/auth.ts';

export const ADMIN_DIR = path.join(PROJECT_ROOT, 'dist', 'admin');

// The console talks only to /graphql on this origin and loads nothing from elsewhere (it must work offline).
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/** The admin console (built by `npm run build` into dist/admin), served as static files at /admin/. */
export const adminRoutes: FastifyPluginAsync = async (app) => {
  publicRoutes(app);
  if (!existsSync(path.join(ADMIN_DIR, 'index.html'))) {
    app.get('/admin/*', { config: { action: 'public' } }, async (_req, reply) =>
      reply.code(503).type('text/plain; charset=utf-8').send('The admin console is not built: run `npm run build`.\n'),
    );
    return;
  }
  app.addHook('onSend', async (req, reply, payload) => {
    if (req.url.startsWith('/admin')) {
      reply.header('Content-Security-Policy', CSP);
      reply.header('Referrer-Policy', 'no-referrer');
    }
    reply.header('X-Content-Type-Options', 'nosniff');
    return payload;
  });
  await app.register(fastifyStatic, { root: ADMIN_DIR, prefix: '/admin/', index: false, wildcard: true });
  // /admin and /admin/ are one route (ignoreTrailingSlash); the page's assets are absolute /admin/assets/… paths.
  app.get('/admin', { config: { action: 'public' } }, async (_req, reply) => reply.sendFile('index.html'));
  // Browsers ask for /favicon.ico on every page of the origin (JSON answers, /docs/errors, /graphiql included).
  app.get('/favicon.ico', { config: { action: 'public' } }, async (_req, reply) =>
    reply.header('Cache-Control', 'public, max-age=86400').type('image/x-icon').sendFile('favicon.ico'),
  );
};
