import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, MASTER_KEY, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';

/**
 * Issue 36: /graphql opened in a browser answered 401 JSON. A GET that accepts HTML now gets GraphiQL, served whole by
 * the gateway, with no key needed to load it and no failing placeholder header; everything else keeps needing a key.
 */
let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp();
});
afterAll(() => t.close());

/** What Chromium sends when a person types the address. */
const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8';

const get = (url: string, headers: Record<string, string>) => t.app.inject({ method: 'GET', url, headers });

/** Every src/href of script, link, img and iframe tags. */
const resourceUrls = (html: string) => [...html.matchAll(/<(?:script|link|img|iframe)\b[^>]*?\b(?:src|href)\s*=\s*["']([^"']+)["']/gi)].map((m) => m[1]!);

describe('GraphiQL at /graphql', () => {
  it('answers a browser with GraphiQL, no key needed, nothing loaded from another origin', async () => {
    const res = await get('/graphql', { accept: BROWSER_ACCEPT });
    expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.body).toContain('GraphiQL');
    expect(res.body).toContain('svc gateway GraphQL');
    // No CDN: every script and stylesheet is inline or on this origin.
    const external = resourceUrls(res.body).filter((u) => /^(https?:)?\/\//i.test(u));
    expect(external).toEqual([]);
    expect(res.body).not.toMatch(/<script[^>]+src=["']https?:/i);
    expect(res.body).not.toMatch(/unpkg\.com|jsdelivr|cdnjs/i);
  });

  it('starts with no header that would fail and a hint on how to authenticate', async () => {
    const res = await get('/graphql', { accept: 'text/html' });
    expect(res.statusCode).toBe(200);
    // The old page put "Authorization: Bearer svc_sk_YOUR_KEY" in the headers editor: every request, the schema's
    // first fetch included, failed with 401.
    expect(res.body).not.toContain('svc_sk_YOUR_KEY');
    expect(res.body).toContain('Open the Headers tab below');
    expect(res.body).toContain('Bearer svc_sk_');
    expect(res.body).not.toContain(MASTER_KEY);
  });

  it('still wants a key for API calls: JSON GET and POST without a key are 401 as before', async () => {
    const json = await get('/graphql?query=%7B__typename%7D', { accept: 'application/json' });
    expectError({ status: json.statusCode, body: JSON.parse(json.body), headers: json.headers } as any, 401, 'invalid_api_key');
    const post = await t.app.inject({
      method: 'POST',
      url: '/graphql',
      headers: { accept: BROWSER_ACCEPT, 'content-type': 'application/json' },
      payload: JSON.stringify({ query: '{ viewer { keyId } }' }),
    });
    expect(post.statusCode).toBe(401);
    // With a key, a JSON GET runs the query as before.
    const ok = await get('/graphql?query=%7Bviewer%7BkeyId%7D%7D', { accept: 'application/json', authorization: `Bearer ${MASTER_KEY}` });
    expect(ok.statusCode).toBe(200);
    expect(JSON.parse(ok.body).data.viewer.keyId).toBe('key_master');
  });

  it('keeps /graphiql as an alias', async () => {
    const res = await get('/graphiql', { accept: BROWSER_ACCEPT });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.body).toContain('GraphiQL');
    expect(res.body).toBe((await get('/graphql', { accept: BROWSER_ACCEPT })).body);
  });

  it('in production: no GraphiQL, /graphql still 401 without a key', async () => {
    const prod = await buildTestApp({ env: { NODE_ENV: 'production' } });
    try {
      const res = await prod.app.inject({ method: 'GET', url: '/graphql', headers: { accept: BROWSER_ACCEPT } });
      expect(res.statusCode).toBe(401);
      expect((await prod.app.inject({ method: 'GET', url: '/graphiql', headers: { accept: BROWSER_ACCEPT } })).statusCode).toBe(404);
    } finally {
      await prod.close();
    }
  });
});
