import { invalid } from '../errors/svc-error.ts';

/** The spec's pagination query (§4.6). */
export interface PageQuery {
  limit?: number;
  starting_after?: string;
  ending_before?: string;
}

export interface Page<T> {
  data: T[];
  hasMore: boolean;
  limit: number;
}

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

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
  const limit = q.limit ?? DEFAULT_PAGE_SIZE;
  if (!Number.isInteger(limit) || limit < 1 || limit > maxLimit) {
    throw invalid('limit', `limit must be an integer between 1 and ${maxLimit}.`);
  }
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
