import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { publicRoutes, registerRouteActions } from '../../src/api/hooks/auth.ts';
import { buildTestApp } from '../helpers/app.ts';

describe('each route declares its action beside its handler', () => {
  it('refuses to start when a route declares none', async () => {
    const app = Fastify();
    registerRouteActions(app);
    app.get('/v1/declared', { config: { action: 'key.list' } }, async () => ({}));
    app.get('/v1/forgotten', async () => ({}));
    await expect(app.ready()).rejects.toThrow('route GET /v1/forgotten declares no action (config.action)');
  });

  it('gives the routes of a public plugin the action public, keeping one a route declares itself', async () => {
    const app = Fastify();
    registerRouteActions(app);
    await app.register(async (scope) => {
      publicRoutes(scope);
      scope.get('/pages/a', async () => 'a');
      scope.get('/pages/b', { config: { action: 'authenticated' } }, async () => 'b');
    });
    await app.ready();
    expect(Object.fromEntries(app.routeActions)).toEqual({ 'GET /pages/a': 'public', 'GET /pages/b': 'authenticated' });
    await app.close();
  });

  it('collects the gateway\'s routes: key routes with their actions, the console and the reference pages public', async () => {
    const t = await buildTestApp();
    try {
      const actions = t.app.routeActions;
      expect(actions.get('POST /v1/keys')).toBe('key.create');
      expect(actions.get('POST /v1/keys/:key_id/revoke')).toBe('key.revoke');
      expect(actions.get('PATCH /v1/routing/policies/:policy_id')).toBe('routing_policy.update');
      expect(actions.get('POST /v1/risk/cases/:case_id/reports')).toBe('risk_report.create');
      expect(actions.get('POST /graphql')).toBe('authenticated');
      expect(actions.get('GET /admin/*')).toBe('public');
      expect(actions.get('GET /docs/api/static/*')).toBe('public');
      expect([...actions.keys()].filter((k) => k.includes(' /v1/')).length).toBeGreaterThan(130);
    } finally {
      await t.close();
    }
  });
});
