import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { AuditEvent } from '../generated/prisma/client.ts';
import { listAuditEvents } from '../domain/audit/service.ts';
import { AuditQuery } from '../domain/audit/schema.ts';
import { unixSeconds } from '../domain/context.ts';
import { sendList } from './list.ts';

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

export const auditRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/v1/audit/events', { schema: { querystring: AuditQuery } }, async (req, reply) =>
    sendList(reply, await listAuditEvents(req.ctx, req.query), '/v1/audit/events', presentAuditEvent),
  );
};
