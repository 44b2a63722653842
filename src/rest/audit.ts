import type { FastifyPluginAsync } from 'fastify';
import type { AuditEvent } from '../generated/prisma/client.ts';
import { AUDIT_MAX_PAGE_SIZE, listAuditEvents, type AuditQuery } from '../domain/audit/service.ts';
import { unixSeconds } from '../domain/context.ts';
import { pageQueryProperties, sendList } from './list.ts';

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

export const auditRoutes: FastifyPluginAsync = async (app) => {
  app.get<{ Querystring: AuditQuery }>(
    '/v1/audit/events',
    {
      schema: {
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { ...pageQueryProperties, project_id: { type: 'string' }, action: { type: 'string' } }, // length: the service, for both surfaces
        },
      },
    },
    async (req, reply) => sendList(reply, await listAuditEvents(req.ctx, req.query), '/v1/audit/events', presentAuditEvent),
  );
};
