import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { AuditEvent } from '../../generated/prisma/client.ts';
import { listAuditEvents } from '../../domain/audit/service.ts';
import { AuditQuery } from '../../domain/audit/schema.ts';
import { unixSeconds } from '../../domain/context.ts';
import { ListOf, sendList } from '../list.ts';
import { NullableStr, Unix } from '../response-fields.ts';

export function presentAuditEvent(e: AuditEvent) {
  return {
    id: e.id,
    object: 'svc.audit_event' as const,
    action: e.action,
    project_id: e.projectId,
    actor_key_id: e.actorKeyId,
    target_id: e.targetId,
    request_id: e.requestId,
    ip: e.ip,
    created_at: unixSeconds(e.createdAt),
    data: e.data,
  };
}

/** presentAuditEvent's answer. */
export const AuditEventObject = Type.Object(
  {
    id: Type.String({ description: 'The audit event id (aud_…).' }),
    object: Type.Literal('svc.audit_event'),
    action: Type.String({ description: 'The action audited, e.g. key.create.' }),
    project_id: NullableStr('The project it happened in, or null: the whole gateway.'),
    actor_key_id: NullableStr('The key that acted, or null: the system or the operator.'),
    target_id: NullableStr('The object acted on, or null.'),
    request_id: NullableStr('The request that acted, or null.'),
    ip: NullableStr('The caller\'s IP address, or null.'),
    created_at: Unix('When it happened'),
    data: Type.Unknown({ description: 'The action\'s details.' }),
  },
  { description: 'An audit log entry.' },
);

export const auditRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/v1/audit/events', { config: { action: 'audit.read' }, schema: { querystring: AuditQuery, response: { 200: ListOf(AuditEventObject) } } }, async (req, reply) =>
    sendList(reply, await listAuditEvents(req.ctx, req.query, app.ports.audit), '/v1/audit/events', presentAuditEvent),
  );
};
