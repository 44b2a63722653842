import type { AuditEvent, Prisma } from '../../generated/prisma/client.ts';
import type { Ctx } from '../context.ts';
import type { PageQuery } from '../pagination.ts';
import type { AuditAction } from './actions.ts';
import { recordAudit, type AuditInput } from './service.ts';

/**
 * The admin console sends this header on every call, with a random id it makes at sign-in. It authenticates nothing:
 * it only tells the audit log that repeated reads come from one person browsing (README, "Admin console").
 */
export const CONSOLE_SESSION_HEADER = 'x-svc-console-session';

const SESSION_ID = /^[A-Za-z0-9_-]{16,64}$/;

// Keyed by the request's Ctx, so the domain learns the header without Ctx (or any service signature) changing.
const sessions = new WeakMap<Ctx, string>();

/** A malformed value is ignored: the request is then audited as any API call is. */
export function setConsoleSession(ctx: Ctx, header: unknown): void {
  if (typeof header === 'string' && SESSION_ID.test(header)) sessions.set(ctx, header);
}

export function consoleSessionOf(ctx: Ctx): string | null {
  return sessions.get(ctx) ?? null;
}

/** The page a list call asked for: its cursor and direction (the page size is not part of it). */
function pageOf(query: PageQuery): string {
  if (query.starting_after) return `after:${query.starting_after}`;
  if (query.ending_before) return `before:${query.ending_before}`;
  return 'first';
}

/**
 * Audits a read (key.list). Without the console header every call is recorded. With it, a call is recorded at most once
 * per (actor, project, console session, page): the console's own navigation does not flood the log, while the first
 * read of each page by each session still appears. The check and the insert run under a transaction-scoped advisory
 * lock on that tuple, so concurrent calls (two tabs, two replicas) cannot both write it. Returns null when skipped.
 */
export async function recordReadAudit(ctx: Ctx, action: AuditAction, input: AuditInput, page: PageQuery): Promise<AuditEvent | null> {
  const session = consoleSessionOf(ctx);
  if (session === null) return recordAudit(ctx.db, ctx, action, input);
  const consolePage = pageOf(page);
  const data = { ...(input.data as Prisma.InputJsonObject | undefined), console_session: session, console_page: consolePage };
  const tuple = JSON.stringify([action, ctx.caller.keyId, input.projectId, session, consolePage]);
  return ctx.db.$transaction(async (tx) => {
    await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${tuple}, 0))`;
    const seen = await tx.auditEvent.findFirst({
      where: {
        projectId: input.projectId,
        action,
        actorKeyId: ctx.caller.keyId,
        AND: [{ data: { path: ['console_session'], equals: session } }, { data: { path: ['console_page'], equals: consolePage } }],
      },
      select: { id: true },
    });
    if (seen) return null;
    return recordAudit(tx, ctx, action, { ...input, data });
  });
}
