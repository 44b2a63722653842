import type { LookupAddress } from 'node:dns';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { EgressPolicy, UNREACHABLE_HOST } from '../../src/kernel/egress.ts';
import { createWebhook, emitKeyRotated, webhookEnv } from './support.ts';

let t: TestApp;
let operator: Client;
let projectId: string;

/** DNS as the tests need it, without the network. */
const zone: Record<string, string[]> = {
  'hooks.example.com': ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'],
  'internal.example.com': ['10.20.30.40'],
  'metadata.example.com': ['169.254.169.254'],
  'mapped.example.com': ['::ffff:192.168.0.10'],
  'rebind.example.com': ['93.184.216.34', '10.0.0.7'],
  'ula.example.com': ['fd12:3456::1'],
  'loopback.example.com': ['127.0.0.1', '::1'],
};
const fakeResolver = async (host: string): Promise<LookupAddress[]> => {
  const addrs = zone[host];
  if (!addrs) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  return addrs.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
};

beforeAll(async () => {
  t = await buildTestApp({ env: webhookEnv() });
  t.deps.webhooks.egress = new EgressPolicy(t.config.egressAllowlist, fakeResolver);
  operator = client(t.app);
  projectId = (await seedProject(operator)).projectId;
});
afterAll(() => t.close());

const create = (body: Record<string, unknown>) => operator.post('/v1/webhooks', { project_id: projectId, events: ['key.rotated'], ...body });

describe('url', () => {
  it.each([
    ['http://hooks.example.com/x', /https/],
    ['ftp://hooks.example.com/x', /https/],
    ['not a url', /valid/],
    ['', /valid/],
    ['https://user:pass@hooks.example.com/x', /credentials/],
    [`https://hooks.example.com/${'a'.repeat(2100)}`, /2048/],
  ])('refuses %s with 400 invalid_request param url', async (url, message) => {
    const res = await create({ url });
    expectError(res, 400, 'invalid_request', 'url');
    expect(res.body.error.message).toMatch(message);
  });

  it.each([
    'https://10.0.0.5/x',
    'https://172.16.3.4/x',
    'https://192.168.1.1/x',
    'https://127.0.0.2/x', // loopback, and not the allowlisted 127.0.0.1
    'https://167772161/x', // 10.0.0.1 written as one number
    'https://0.0.0.0/x',
    'https://100.64.0.1/x',
    'https://224.0.0.1/x',
    'https://169.254.169.254/latest/meta-data',
    'https://[::1]/x',
    'https://[::ffff:10.0.0.1]/x',
    'https://[::ffff:127.0.0.2]/x',
    'https://[::127.0.0.2]/x', // IPv4-compatible IPv6 (deprecated ::a.b.c.d)
    'https://[::10.0.0.1]/x',
    'https://[fe80::1]/x',
    'https://[fd00:ec2::254]/x',
    'https://[::]/x',
    'https://internal.example.com/x',
    'https://metadata.example.com/x',
    'https://mapped.example.com/x',
    'https://ula.example.com/x',
    'https://rebind.example.com/x',
  ])('refuses %s, a private or otherwise non-public destination, with param url', async (url) => {
    const res = await create({ url });
    expectError(res, 400, 'invalid_request', 'url');
    expect(res.body.error.message).not.toMatch(/10\.20\.30\.40|169\.254|192\.168/); // resolved addresses are not echoed
  });

  it.each([' https://hooks.example.com/x', 'https://hooks.example.com/x\n', 'https://hooks.example.com/a\tb'])(
    'refuses %j: spaces and control characters a URL parser would drop',
    async (url) => {
      expectError(await create({ url }), 400, 'invalid_request', 'url');
    },
  );

  it('accepts a public host and the allowlisted loopback address, as given', async () => {
    for (const url of [
      'https://hooks.example.com/x',
      'https://HOOKS.example.com',
      'https://127.0.0.1:8443/x',
      'https://[::ffff:127.0.0.1]/x',
      'https://loopback.example.com/x', // 127.0.0.1 and ::1: only the allowlisted 127.0.0.1 will be connected to
    ]) {
      const res = await create({ url });
      expect({ url, status: res.status, echoed: res.body.url }).toEqual({ url, status: 200, echoed: url });
    }
  });

  it('answers a name that does not resolve exactly as one that resolves privately: creation is no oracle of internal DNS', async () => {
    const answers = [];
    for (const url of [
      'https://not-yet.example.com/x', // does not resolve
      'https://internal.example.com/x', // 10.20.30.40
      'https://metadata.example.com/x', // 169.254.169.254
      'https://ula.example.com/x', // fd12:3456::1
      'https://rebind.example.com/x', // public and private
    ]) {
      const res = await create({ url });
      expectError(res, 400, 'invalid_request', 'url');
      answers.push(res.body.error.message);
    }
    expect(new Set(answers).size).toBe(1);
    expect(answers[0]).toBe(UNREACHABLE_HOST);
    // A resolver that fails or answers nothing is the same answer.
    const saved = t.deps.webhooks.egress;
    try {
      t.deps.webhooks.egress = new EgressPolicy(t.config.egressAllowlist, async () => []);
      expect((await create({ url: 'https://empty.example.com/x' })).body.error.message).toBe(UNREACHABLE_HOST);
      t.deps.webhooks.egress = new EgressPolicy(t.config.egressAllowlist, async () => {
        throw Object.assign(new Error('queryA ESERVFAIL'), { code: 'ESERVFAIL' });
      });
      expect((await create({ url: 'https://servfail.example.com/x' })).body.error.message).toBe(UNREACHABLE_HOST);
    } finally {
      t.deps.webhooks.egress = saved;
    }
  });

  describe('loopback names (RFC 6761)', () => {
    const LOOPBACK_NAMES = [
      'localhost',
      'localhost.',
      'LOCALHOST',
      'hooks.localhost',
      'a.b.localhost.',
      'localhost.localdomain',
      'ip6-localhost',
      'ip6-loopback',
    ];
    /** A DNS that claims every name is public: the names must be refused without asking it. */
    const lookups: string[] = [];
    const publicDns = async (host: string): Promise<LookupAddress[]> => {
      lookups.push(host);
      return [{ address: '93.184.216.34', family: 4 }];
    };

    it.each(LOOPBACK_NAMES)('refuses https://%s/ up front with 400 invalid_request param url', async (name) => {
      const saved = t.deps.webhooks.egress;
      t.deps.webhooks.egress = new EgressPolicy([], publicDns);
      try {
        lookups.length = 0;
        const res = await create({ url: `https://${name}:8443/hook` });
        expectError(res, 400, 'invalid_request', 'url');
        expect(res.body.error.message).toMatch(/loopback name/);
        expect(lookups).toEqual([]);
      } finally {
        t.deps.webhooks.egress = saved;
      }
    });

    it('accepts them when SVC_EGRESS_ALLOWLIST names them, or allows a loopback address (then only that address is connected to)', async () => {
      const saved = t.deps.webhooks.egress;
      try {
        t.deps.webhooks.egress = new EgressPolicy(['localhost', '*.localhost'], async () => [{ address: '127.0.0.1', family: 4 }]);
        for (const url of ['https://localhost/x', 'https://localhost./x', 'https://hooks.localhost/x']) {
          expect({ url, status: (await create({ url })).status }).toEqual({ url, status: 200 });
        }
        expectError(await create({ url: 'https://ip6-localhost/x' }), 400, 'invalid_request', 'url');
        t.deps.webhooks.egress = new EgressPolicy(['127.0.0.1'], async () => [{ address: '127.0.0.1', family: 4 }]);
        expect((await create({ url: 'https://localhost.localdomain/x' })).status).toBe(200);
      } finally {
        t.deps.webhooks.egress = saved;
      }
    });
  });
});

describe('events', () => {
  it.each([
    [{ events: ['key.rotated', 'key.exploded'] }, /key\.exploded/],
    [{ events: [] }, /non-empty/],
    [{ events: [42] }, /events/],
    [{ events: 'key.rotated' }, /events/],
  ])('refuses %j with param events', async (body, message) => {
    const res = await create({ url: 'https://hooks.example.com/x', ...body });
    expectError(res, 400, 'invalid_request', 'events');
    expect(res.body.error.message).toMatch(message);
  });

  it('requires url and events, and no unknown field', async () => {
    expectError(await operator.post('/v1/webhooks', { project_id: projectId, events: ['key.rotated'] }), 400, 'invalid_request', 'url');
    expectError(await operator.post('/v1/webhooks', { project_id: projectId, url: 'https://hooks.example.com/' }), 400, 'invalid_request', 'events');
    expectError(await create({ url: 'https://hooks.example.com/', secret: 'whsec_mine' }), 400, 'invalid_request', 'secret');
  });
});

describe('project', () => {
  it('needs a project_id from the operator: 400 missing_project_id', async () => {
    const res = await operator.post('/v1/webhooks', { url: 'https://hooks.example.com/x', events: ['key.rotated'] });
    expectError(res, 400, 'missing_project_id', 'project_id');
  });

  it('answers 404 not_found for a project that does not exist', async () => {
    const res = await create({ project_id: 'prj_00000000000000000000000000', url: 'https://hooks.example.com/x' });
    expectError(res, 404, 'not_found', 'project_id');
  });

  it('answers 401 invalid_api_key without a key', async () => {
    expectError(await operator.get('/v1/webhooks', { key: null }), 401, 'invalid_api_key');
  });
});

describe('unknown ids', () => {
  it('answer 404 not_found naming the parameter', async () => {
    const missing = 'wh_00000000000000000000000000';
    expectError(await operator.get(`/v1/webhooks/${missing}`), 404, 'not_found', 'webhook_id');
    expectError(await operator.post(`/v1/webhooks/${missing}/disable`), 404, 'not_found', 'webhook_id');
    expectError(await operator.get(`/v1/webhooks/${missing}/deliveries`), 404, 'not_found', 'webhook_id');
    expectError(await operator.post(`/v1/webhooks/${missing}/deliveries/del_00000000000000000000000000/replay`), 404, 'not_found', 'webhook_id');
    const webhook = await createWebhook(operator, { project_id: projectId, url: 'https://hooks.example.com/x', events: ['key.rotated'] });
    expectError(
      await operator.post(`/v1/webhooks/${webhook.id}/deliveries/del_00000000000000000000000000/replay`),
      404,
      'not_found',
      'delivery_id',
    );
  });
});

describe('project_id on the routes of one webhook (CONTRACT §2, §3)', () => {
  it('is checked in the query and the body like X-Svc-Project, and the deliveries list takes it', async () => {
    const a = await seedProject(operator);
    const b = await seedProject(operator);
    const keyA = client(t.app, a.secret);
    const webhook = await createWebhook(keyA, { project_id: a.projectId, url: 'https://hooks.example.com/scoped', events: ['key.rotated'] });
    expectError(await keyA.get(`/v1/webhooks/${webhook.id}?project_id=${b.projectId}`), 404, 'not_found', 'project_id');
    expectError(await keyA.get(`/v1/webhooks/${webhook.id}/deliveries?project_id=${b.projectId}`), 404, 'not_found', 'project_id');
    expectError(await operator.post(`/v1/webhooks/${webhook.id}/disable`, { project_id: b.projectId }), 404, 'not_found', 'webhook_id');
    expect((await keyA.get(`/v1/webhooks/${webhook.id}`)).body.status).toBe('active');

    const own = await keyA.get(`/v1/webhooks/${webhook.id}/deliveries?project_id=${a.projectId}`);
    expect(own.status).toBe(200);
    expect(own.body.data).toEqual([]);
    expect((await operator.get(`/v1/webhooks/${webhook.id}/deliveries?project_id=${a.projectId}`)).status).toBe(200);
  });
});

describe('pagination', () => {
  it('refuses both cursors, a bad limit, and a cursor that names no delivery of the webhook', async () => {
    const webhook = await createWebhook(operator, { project_id: projectId, url: 'https://hooks.example.com/y', events: ['key.rotated'] });
    const base = `/v1/webhooks/${webhook.id}/deliveries`;
    expectError(await operator.get(base, { query: { starting_after: 'del_a', ending_before: 'del_b' } }), 400, 'invalid_request');
    expectError(await operator.get(base, { query: { limit: 101 } }), 400, 'invalid_request', 'limit');
    expectError(await operator.get('/v1/webhooks', { query: { limit: 0 } }), 400, 'invalid_request', 'limit');
    expectError(await operator.get(base, { query: { starting_after: 'del_00000000000000000000000000' } }), 400, 'invalid_request', 'starting_after');
    expectError(await operator.get(base, { query: { status: 'failed' } }), 400, 'invalid_request', 'status');
  });

  it("refuses another webhook's delivery as a cursor", async () => {
    const p = await seedProject(operator);
    const a = await createWebhook(operator, { project_id: p.projectId, url: 'https://hooks.example.com/a', events: ['key.rotated'] });
    const b = await createWebhook(operator, { project_id: p.projectId, url: 'https://hooks.example.com/b', events: ['key.rotated'] });
    await emitKeyRotated(operator, p.keyId);
    const [ofA] = (await operator.get(`/v1/webhooks/${a.id}/deliveries`)).body.data;
    expectError(await operator.get(`/v1/webhooks/${b.id}/deliveries`, { query: { starting_after: ofA.id } }), 400, 'invalid_request', 'starting_after');
  });
});
