import type { FastifyReply } from 'fastify';
import { Type, type TSchema } from 'typebox';
import type { Page } from '../domain/pagination.ts';

/** The spec's list envelope (§2.6) and its headers (§4.6 rule 3): one shape for every list endpoint. */
export function sendList<T, J>(reply: FastifyReply, page: Page<T>, url: string, present: (row: T) => J) {
  reply.header('X-Svc-Page-Limit', String(page.limit));
  reply.header('X-Svc-Has-More', page.hasMore ? 'true' : 'false');
  return { object: 'list' as const, data: page.data.map(present), has_more: page.hasMore, url };
}

/** The list envelope's response schema around one item's schema (sendList's answer, field for field). */
export const ListOf = <T extends TSchema>(item: T) =>
  Type.Object({ object: Type.Literal('list'), data: Type.Array(item), has_more: Type.Boolean(), url: Type.String() });
