import { expect } from 'vitest';
import { seedProject, type Client } from '../helpers/app.ts';
import { uniqueName } from '../helpers/services.ts';
import type { GqlResponse } from '../graphql/gql.ts';

export const REQUESTER_SCOPES = ['keys:manage', 'governance:manage', 'budgets:manage', 'inference:write', 'audit:read', 'usage:read'];

export interface Governed {
  projectId: string;
  /** The key that asks for changes. */
  requester: { id: string; secret: string };
  /** Another key of the project that may approve them. */
  approver: { id: string; secret: string };
}

/** A project with a requester key and an approver key (governance:manage unless told), dual control on `resources`. */
export async function governedProject(operator: Client, resources: string[], approverScopes = ['governance:manage']): Promise<Governed> {
  const seeded = await seedProject(operator, { scopes: REQUESTER_SCOPES });
  const approver = await operator.post('/v1/keys', { project_id: seeded.projectId, name: uniqueName('approver'), scopes: approverScopes });
  expect(approver.status, approver.raw).toBe(200);
  if (resources.length > 0) {
    const set = await operator.put(`/v1/projects/${seeded.projectId}/governance`, { dual_control: resources });
    expect(set.status, set.raw).toBe(200);
  }
  return {
    projectId: seeded.projectId,
    requester: { id: seeded.keyId, secret: seeded.secret },
    approver: { id: approver.body.id, secret: approver.body.secret },
  };
}

/** REST: 403 dual_control_required, the approval's id in the error object and in X-Svc-Approval-Id. */
export function expectQueued(res: { status: number; headers: Record<string, unknown>; body: any; raw?: string }): string {
  expect({ status: res.status, code: res.body?.error?.code }, res.raw).toEqual({ status: 403, code: 'dual_control_required' });
  const e = res.body.error;
  expect(Object.keys(e).sort()).toEqual(['approval_id', 'code', 'doc_url', 'message', 'param', 'request_id', 'type']);
  expect(e.approval_id).toMatch(/^apr_/);
  expect(res.headers['x-svc-approval-id']).toBe(e.approval_id);
  expect(e.request_id).toBe(res.headers['x-svc-request-id']);
  expect(e.doc_url).toMatch(/\/docs\/errors#dual_control_required$/);
  return e.approval_id;
}

/** GraphQL: the same error in extensions (http_status 403, approval_id), and the field's data null. */
export function expectGqlQueued(res: GqlResponse, field: string): string {
  const err = res.body?.errors?.[0];
  expect({ code: err?.extensions?.code, http: err?.extensions?.http_status, path: err?.path }, res.raw).toEqual({
    code: 'dual_control_required',
    http: 403,
    path: [field],
  });
  expect(err.extensions.approval_id).toMatch(/^apr_/);
  expect(err.extensions.request_id).toBe(res.headers['x-svc-request-id']);
  expect(res.body.data?.[field] ?? null).toBeNull();
  return err.extensions.approval_id;
}
