import { MAX_PAGE_SIZE, normalizePageQuery, type Page, type PageQuery } from '../domain/pagination.ts';
import { SvcError, invalid } from '../errors/svc-error.ts';

/** Relay's connection arguments. Cursors are plain object ids, as REST's starting_after / ending_before. */
export interface ConnectionArgs {
  first?: number | null;
  last?: number | null;
  after?: string | null;
  before?: string | null;
}

interface PageRequest {
  query: PageQuery;
  /** last/before: the page just newer than the cursor (REST's ending_before). */
  backward: boolean;
}

const given = <T>(v: T | null | undefined): v is T => v !== null && v !== undefined;

/**
 * Lists are newest first (CONTRACT §4). `first`/`after` walk to older objects (REST's limit/starting_after),
 * `last`/`before` to newer ones (limit/ending_before). Other combinations are refused rather than guessed at.
 */
function toPageRequest(args: ConnectionArgs): PageRequest {
  if (given(args.first) && given(args.last)) throw invalid('last', 'Pass first or last, not both.');
  if (given(args.after) && given(args.before)) throw invalid('before', 'Pass after or before, not both.');
  if (given(args.last) && given(args.after)) throw invalid('after', 'after goes with first; last pages backward from before.');
  if (given(args.first) && given(args.before)) throw invalid('before', 'before goes with last; first pages forward from after.');
  if (given(args.last) && !given(args.before)) {
    throw invalid('before', 'last pages backward from a cursor: pass before as well (lists are newest first).');
  }
  const backward = given(args.before);
  const limit = (backward ? args.last : args.first) ?? undefined;
  return backward
    ? { backward, query: { limit, ending_before: args.before! } }
    : { backward, query: { limit, ...(given(args.after) ? { starting_after: args.after } : {}) } };
}

/** The domain names REST's parameters; GraphQL callers passed first/last/after/before. */
function renamePageParams(err: unknown, backward: boolean): unknown {
  if (!(err instanceof SvcError) || err.code !== 'invalid_request') return err;
  const names: Record<string, string> = { limit: backward ? 'last' : 'first', starting_after: 'after', ending_before: 'before' };
  const renamed = err.param !== null ? names[err.param] : undefined;
  if (!renamed) return err;
  return new SvcError('invalid_request', { param: renamed, message: err.message.replace(err.param!, renamed), cause: err });
}

export interface Connection<T> {
  edges: { cursor: string; node: T }[];
  pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; startCursor: string | null; endCursor: string | null };
}

const byId = (node: { id: string }) => node.id;

function toConnection<T>(page: Page<T>, request: PageRequest, cursorOf: (node: T) => string): Connection<T> {
  const edges = page.data.map((node) => ({ cursor: cursorOf(node), node }));
  return {
    edges,
    pageInfo: {
      // Forward: more older objects exist; a cursor means newer ones do. Backward: the mirror image.
      hasNextPage: request.backward ? true : page.hasMore,
      hasPreviousPage: request.backward ? page.hasMore : request.query.starting_after !== undefined,
      startCursor: edges[0]?.cursor ?? null,
      endCursor: edges.at(-1)?.cursor ?? null,
    },
  };
}

/**
 * A root list: the service paginates (limits, cursor checks, tenant filter) exactly as for REST. The cursor is the
 * list's cursor field (the id; a usage record's request id).
 */
export async function serviceConnection<T extends { id: string }>(
  args: ConnectionArgs,
  list: (query: PageQuery) => Promise<Page<T>>,
): Promise<Connection<T>>;
export async function serviceConnection<T>(
  args: ConnectionArgs,
  list: (query: PageQuery) => Promise<Page<T>>,
  cursorOf: (node: T) => string,
): Promise<Connection<T>>;
export async function serviceConnection<T>(
  args: ConnectionArgs,
  list: (query: PageQuery) => Promise<Page<T>>,
  cursorOf: (node: T) => string = byId as (node: T) => string,
): Promise<Connection<T>> {
  const request = toPageRequest(args);
  try {
    return toConnection(await list(request.query), request, cursorOf);
  } catch (err) {
    throw renamePageParams(err, request.backward);
  }
}

/**
 * A nested list loaded with its parent (a webhook's deliveries): the Prisma arguments for the relation, so one
 * statement serves every parent. A cursor here only filters; it is not checked to name an object.
 */
export function relationPageArgs(args: ConnectionArgs, maxLimit = MAX_PAGE_SIZE) {
  const request = toPageRequest(args);
  let q: ReturnType<typeof normalizePageQuery>;
  try {
    q = normalizePageQuery(request.query, maxLimit);
  } catch (err) {
    throw renamePageParams(err, request.backward);
  }
  const cursor = q.starting_after ?? q.ending_before;
  return {
    ...(cursor !== undefined ? { where: { id: request.backward ? { gt: cursor } : { lt: cursor } } } : {}),
    orderBy: { id: request.backward ? ('asc' as const) : ('desc' as const) },
    take: q.limit + 1,
  };
}

/** The connection over rows loaded with relationPageArgs(args). */
export function relationConnection<T extends { id: string }>(rows: T[], args: ConnectionArgs, maxLimit = MAX_PAGE_SIZE): Connection<T> {
  const request = toPageRequest(args);
  const { limit } = normalizePageQuery(request.query, maxLimit);
  const data = rows.slice(0, limit);
  if (request.backward) data.reverse();
  return toConnection({ data, hasMore: rows.length > limit, limit }, request, byId);
}
