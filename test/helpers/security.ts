import { expect } from 'vitest';
import type { Client } from './app.ts';
import { expectError } from './expect.ts';

export interface Probe {
  method: 'get' | 'post' | 'put' | 'delete';
  url: string;
  body?: unknown;
  headers?: Record<string, string>;
}

/** Each probe gets `status` with the error `code` (the probe's name is in the failure message). */
async function expectEachProbe(api: Client, probes: Probe[], status: number, code: string): Promise<void> {
  for (const p of probes) {
    const res =
      p.method === 'get' || p.method === 'delete'
        ? await api[p.method](p.url, { headers: p.headers })
        : await api[p.method](p.url, p.body, { headers: p.headers });
    expect({ probe: `${p.method.toUpperCase()} ${p.url}`, status: res.status }).toEqual({
      probe: `${p.method.toUpperCase()} ${p.url}`,
      status,
    });
    expectError(res, status, code);
  }
}

/** Another project's ids must look absent: 404 not_found, never 403, never the object. Reused by every capability. */
export const expectHiddenFrom = (api: Client, probes: Probe[]): Promise<void> => expectEachProbe(api, probes, 404, 'not_found');

/** A scope-less key gets 403 insufficient_scope on each route. */
export const expectScopeRequired = (api: Client, probes: Probe[]): Promise<void> => expectEachProbe(api, probes, 403, 'insufficient_scope');
