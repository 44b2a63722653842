import { expect } from 'vitest';
import type { Client } from './app.ts';
import { expectError } from './expect.ts';

export interface Probe {
  method: 'get' | 'post' | 'put' | 'delete';
  url: string;
  body?: unknown;
  headers?: Record<string, string>;
}

/** Another project's ids must look absent: 404 not_found, never 403, never the object. Reused by every capability. */
export async function expectHiddenFrom(api: Client, probes: Probe[]): Promise<void> {
  for (const p of probes) {
    const res =
      p.method === 'get' || p.method === 'delete'
        ? await api[p.method](p.url, { headers: p.headers })
        : await api[p.method](p.url, p.body, { headers: p.headers });
    expect({ probe: `${p.method.toUpperCase()} ${p.url}`, status: res.status }).toEqual({
      probe: `${p.method.toUpperCase()} ${p.url}`,
      status: 404,
    });
    expectError(res, 404, 'not_found');
  }
}

/** A scope-less key gets 403 insufficient_scope on each route. */
export async function expectScopeRequired(api: Client, probes: Probe[]): Promise<void> {
  for (const p of probes) {
    const res =
      p.method === 'get' || p.method === 'delete'
        ? await api[p.method](p.url, { headers: p.headers })
        : await api[p.method](p.url, p.body, { headers: p.headers });
    expect({ probe: `${p.method.toUpperCase()} ${p.url}`, status: res.status }).toEqual({
      probe: `${p.method.toUpperCase()} ${p.url}`,
      status: 403,
    });
    expectError(res, 403, 'insufficient_scope');
  }
}
