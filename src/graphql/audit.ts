import { AUDIT_ACTION_NAMES } from '../domain/audit/actions.ts';
import { listAuditEvents } from '../domain/audit/service.ts';
import { AUDIT_MAX_PAGE_SIZE } from '../domain/audit/schema.ts';
import { builder } from './builder.ts';
import { serviceConnection } from './connections.ts';
import { listFilters } from './inputs.ts';

export const AuditEventRef = builder.prismaObject('AuditEvent', {
  fields: (t) => ({
    id: t.exposeID('id'),
    action: t.exposeString('action', { description: 'e.g. key.revoke, webhook.delivery.failed.' }),
    projectId: t.exposeID('projectId', { nullable: true }),
    actorKeyId: t.exposeID('actorKeyId', { nullable: true }),
    targetId: t.exposeID('targetId', { nullable: true }),
    requestId: t.exposeString('requestId', { nullable: true }),
    ip: t.exposeString('ip', { nullable: true }),
    data: t.expose('data', { type: 'JSON' }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
  }),
});

builder.queryFields((t) => ({
  auditActions: t.stringList({
    // Nullable like every scoped field: a refusal leaves the query's other fields their data.
    nullable: { list: true, items: false },
    authScopes: { action: 'audit.read' },
    description: 'Every action the audit log can hold (the values auditEvents(action:) filters on), from one table.',
    resolve: () => AUDIT_ACTION_NAMES,
  }),
  auditEvents: t.connection(
    {
      type: AuditEventRef,
      nullable: true,
      authScopes: { action: 'audit.read' },
      description: `Newest first; first/last up to ${AUDIT_MAX_PAGE_SIZE}, as GET /v1/audit/events.`,
      args: { projectId: t.arg.id(), action: t.arg.string() },
      resolve: (_root, args, { ctx, ports }) =>
        serviceConnection(args, (query) => listAuditEvents(ctx, { ...query, ...listFilters(args) }, ports.audit)),
    },
    { name: 'AuditEventConnection' },
    { name: 'AuditEventEdge' },
  ),
}));
