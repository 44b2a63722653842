import { expect } from 'vitest';

interface Res {
  status: number;
  headers: Record<string, unknown>;
  body: any;
}

/** The spec's error object (§7), exactly: no `object` field, request_id equal to the header, doc_url to the code. */
export function expectError(res: Res, status: number, code: string, param: string | null | undefined = undefined): void {
  expect({ status: res.status, code: res.body?.error?.code }).toEqual({ status, code });
  expect(Object.keys(res.body)).toEqual(['error']);
  const e = res.body.error;
  expect(Object.keys(e).sort()).toEqual(['code', 'doc_url', 'message', 'param', 'request_id', 'type']);
  expect(e.type).toBe('svc.error');
  expect(typeof e.message).toBe('string');
  expect(e.message.length).toBeGreaterThan(0);
  expect(e.request_id).toMatch(/^req_/);
  expect(res.headers['x-svc-request-id']).toBe(e.request_id);
  expect(e.doc_url).toMatch(new RegExp(`/docs/errors#${code}$`));
  if (param !== undefined) expect(e.param).toBe(param);
}
