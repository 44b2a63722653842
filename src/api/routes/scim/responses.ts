import type { FastifyReply } from 'fastify';

export const SCIM_BASE = '/scim/v2';
export const SCIM_TYPE = 'application/scim+json';

export function sendScim(reply: FastifyReply, status: number, body?: unknown): FastifyReply {
  reply.code(status);
  if (body === undefined) return reply.send();
  return reply.type(SCIM_TYPE).send(JSON.stringify(body));
}

/** RFC 7644 §3.12: the SCIM error object (IdPs read this, not the gateway's error object). */
export function sendScimError(reply: FastifyReply, status: number, detail: string, scimType?: string): FastifyReply {
  return sendScim(reply, status, { schemas: ['urn:ietf:params:scim:api:messages:2.0:Error'], status: String(status), ...(scimType ? { scimType } : {}), detail });
}
