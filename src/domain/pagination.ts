import { Type, type Static } from 'typebox';
import { says } from '../config/schema-errors.ts';
import { invalid } from '../errors/svc-error.ts';
import { Input } from './schema.ts';
import { parseInput } from './validation.ts';

export interface Page<T> {
  data: T[];
  hasMore: boolean;
  limit: number;
}

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

const Cursor = (description: string) =>
  Type.Optional(Type.String({ minLength: 1, maxLength: 200, description, ...says('must be an object id of 1 to 200 characters') }));

/** The spec's pagination query (§4.6), for a list of at most `maxLimit` a page: every list query spreads these. */
export const pageQueryProperties = (maxLimit = MAX_PAGE_SIZE) => ({
  limit: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: maxLimit,
      description: `Objects per page, 1 to ${maxLimit} (default ${DEFAULT_PAGE_SIZE}).`,
      ...says('must be an integer between {minimum} and {maximum}'),
    }),
  ),
  starting_after: Cursor('A cursor (the id of an object of this list): the page of objects older than it.'),
  ending_before: Cursor('A cursor (the id of an object of this list): the page of objects newer than it.'),
});

export const PageQuery = Input(pageQueryProperties());
export type PageQuery = Static<typeof PageQuery>;
const pageQueries = new Map<number, typeof PageQuery>([[MAX_PAGE_SIZE, PageQuery]]);

type Direction = { lt: string } | { gt: string };

export interface PageSource<T> {
  /** The cursor column, e.g. 'id' or 'requestId'. */
  cursorField: string;
  /** Rows of the list, filtered by `cursor` on the cursor column, in `order`, at most `take`. */
  fetch(args: { cursor: Direction | undefined; order: 'asc' | 'desc'; take: number }): Promise<T[]>;
  /** Whether a cursor names an object of this list (the same filters): else 400 invalid_request. */
  exists(cursor: string): Promise<boolean>;
}

/** Validates limit and cursors; both surfaces (REST query, GraphQL first/last) go through here. */
export function normalizePageQuery(q: PageQuery, maxLimit = MAX_PAGE_SIZE): Required<Pick<PageQuery, 'limit'>> & PageQuery {
  let schema = pageQueries.get(maxLimit);
  if (!schema) pageQueries.set(maxLimit, (schema = Input(pageQueryProperties(maxLimit))));
  const page = { limit: q.limit, starting_after: q.starting_after, ending_before: q.ending_before };
  for (const k of Object.keys(page) as (keyof PageQuery)[]) if (page[k] === undefined) delete page[k];
  parseInput(schema, page);
  const limit = q.limit ?? DEFAULT_PAGE_SIZE;
  if (q.starting_after !== undefined && q.ending_before !== undefined) {
    throw invalid('ending_before', 'Pass starting_after or ending_before, not both.');
  }
  return { ...q, limit };
}

/**
 * Newest first. Ids are time-ordered, so the id is the cursor: starting_after gives the next older page, ending_before
 * the page just newer than the cursor (still newest first). One extra row tells whether more exist in that direction.
 */
export async function paginate<T>(query: PageQuery, source: PageSource<T>, maxLimit = MAX_PAGE_SIZE): Promise<Page<T>> {
  const q = normalizePageQuery(query, maxLimit);
  const cursor = q.starting_after ?? q.ending_before;
  if (cursor !== undefined && !(await source.exists(cursor))) {
    const param = q.starting_after !== undefined ? 'starting_after' : 'ending_before';
    throw invalid(param, `${param} does not name an object of this list.`);
  }
  if (q.ending_before !== undefined) {
    const rows = await source.fetch({ cursor: { gt: q.ending_before }, order: 'asc', take: q.limit + 1 });
    return { data: rows.slice(0, q.limit).reverse(), hasMore: rows.length > q.limit, limit: q.limit };
  }
  const rows = await source.fetch({
    cursor: q.starting_after !== undefined ? { lt: q.starting_after } : undefined,
    order: 'desc',
    take: q.limit + 1,
  });
  return { data: rows.slice(0, q.limit), hasMore: rows.length > q.limit, limit: q.limit };
}

/** The two reads of a Prisma model that a list by id needs (a model delegate such as `ctx.db.riskCase` is one). */
export interface RowsById<T> {
  findMany(args: { where: object; orderBy: { id: 'asc' | 'desc' }; take: number }): Promise<T[]>;
  count(args: { where: object }): Promise<number>;
}

/**
 * The usual list: one model's rows under `where` (which carries the project filter), paged by id, newest first.
 * `select` (e.g. `{ omit: … }`) is spread into the row query.
 */
export function pageById<T>(query: PageQuery, rows: RowsById<T>, where: object, select: object = {}): Promise<Page<T>> {
  return paginate(query, {
    cursorField: 'id',
    fetch: ({ cursor, order, take }) => rows.findMany({ ...select, where: cursor ? { AND: [where, { id: cursor }] } : where, orderBy: { id: order }, take }),
    exists: async (id) => (await rows.count({ where: { AND: [where, { id }] } })) > 0,
  });
}
