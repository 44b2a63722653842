import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, seedProject } from '../helpers/app.ts';
import { chat, startGateway, type Gateway } from './support.ts';

/**
 * /metrics shows end customers without a series per customer (CONTRACT §22): only the SVC_METRICS_TOP_CUSTOMERS with the
 * highest spend this month, none by default.
 */
const TOKEN = 'prometheus-scrape-token-0123456789';
let on: Gateway;
let off: Gateway;
beforeAll(async () => {
  [on, off] = await Promise.all([
    startGateway({ SVC_METRICS_TOKEN: TOKEN, SVC_METRICS_TOP_CUSTOMERS: '2' }),
    startGateway({ SVC_METRICS_TOKEN: TOKEN }),
  ]);
}, 120_000);
afterAll(async () => {
  await Promise.all([on?.close(), off?.close()]);
});

async function customerSeries(g: Gateway): Promise<[string, string, number][]> {
  const res = await g.t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } });
  expect(res.statusCode).toBe(200);
  const family = parsePrometheusTextFormat(res.body).find((f) => f.name === 'svc_customer_spent_usd');
  return (family?.metrics ?? []).map((m) => {
    const labels = (m as { labels: Record<string, string> }).labels;
    return [labels.project!, labels.customer!, Number((m as { value: string }).value)];
  });
}

async function spend(g: Gateway, perCustomer: Record<string, number>) {
  const s = await seedProject(g.operator, { scopes: ['inference:write'], limits: { requests_per_minute: 1000, tokens_per_minute: 1_000_000, burst: 0 } });
  const api = client(g.t.app, s.secret);
  for (const [customer, n] of Object.entries(perCustomer)) for (let i = 0; i < n; i++) expect((await chat(api, customer)).status).toBe(200);
  await g.t.deps.outcomes.flush();
  return s.projectId;
}

describe('/metrics and end customers', () => {
  it('shows only the top N customers by month spend when SVC_METRICS_TOP_CUSTOMERS is set', async () => {
    const projectId = await spend(on, { small: 1, big: 3, middle: 2 });
    expect(await customerSeries(on)).toEqual([
      [projectId, 'big', 9],
      [projectId, 'middle', 6],
    ]);
  });

  it('shows none by default', async () => {
    await spend(off, { a: 1, b: 1 });
    expect(await customerSeries(off)).toEqual([]);
  });
});
