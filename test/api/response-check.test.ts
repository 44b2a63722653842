import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { registerResponseCheck } from '../../src/api/response-check.ts';

/** SVC_CHECK_RESPONSES: the suite's guard that a route's response schema writes the answer exactly as it is. */
async function appWith(answer: Record<string, unknown>) {
  const app = Fastify();
  registerResponseCheck(app);
  const schema = { type: 'object', properties: { id: { type: 'string' }, count: { type: 'integer' } } };
  app.get('/thing', { schema: { response: { 200: schema } } }, async () => answer);
  app.get('/free', async () => ({ anything: [1, 2] }));
  await app.ready();
  return app;
}

describe('the response schema check', () => {
  it('lets an answer through that the schema writes byte for byte', async () => {
    const app = await appWith({ id: 'x', count: 2 });
    const res = await app.inject({ method: 'GET', url: '/thing' });
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe('{"id":"x","count":2}');
  });

  it('fails an answer with a field the schema leaves out, naming the route and the field', async () => {
    const app = await appWith({ id: 'x', count: 2, secret_field: true });
    const res = await app.inject({ method: 'GET', url: '/thing' });
    expect(res.statusCode).toBe(500);
    expect(res.json().message).toMatch(/GET \/thing \(200\).*\$\.secret_field/);
  });

  it('fails an answer the schema would coerce (a fraction written as an integer) or reorder', async () => {
    const app = await appWith({ id: 'x', count: 2.5 });
    expect((await app.inject({ method: 'GET', url: '/thing' })).json().message).toMatch(/\$\.count/);
    const reordered = await appWith({ count: 2, id: 'x' });
    expect((await reordered.inject({ method: 'GET', url: '/thing' })).json().message).toMatch(/key order differs/);
  });

  it('leaves routes without a response schema alone', async () => {
    const app = await appWith({ id: 'x' });
    expect((await app.inject({ method: 'GET', url: '/free' })).json()).toEqual({ anything: [1, 2] });
  });
});
