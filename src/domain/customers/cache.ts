import type { LRUCache } from 'lru-cache';
import type { Db } from '../../db/client.ts';
import { loadingCache, readThrough } from '../../kernel/cache.ts';
import type { Bus } from '../../pubsub/bus.ts';
import type { CustomerPolicies, CustomerPolicy } from './ports.ts';

/** The bus channel of customer changes (`<project>\n<customer>` as message): every replica's cache evicts on it. */
export const CUSTOMERS_CHANGED = 'customers:changed';
/** A safety net only: changes are pushed over the bus. */
export const CUSTOMER_CACHE_TTL_MS = 60_000;
const MAX_ENTRIES = 100_000;

/** A customer with no row or no bounds: cached too, so that a steady stream of unbounded customers reads no SQL. */
const NONE = Object.freeze({ none: true as const });
type Entry = CustomerPolicy | typeof NONE;

/** One statement: the customer's bounds, or null when it has none. */
export async function loadCustomerPolicy(db: Db, projectId: string, customer: string): Promise<CustomerPolicy | null> {
  const row = await db.customer.findUnique({
    where: { projectId_customer: { projectId, customer } },
    select: { budgetMicros: true, hardStop: true, requestsPerMinute: true, tokensPerMinute: true, rateLimitsUpdatedAt: true },
  });
  if (!row || (row.budgetMicros === null && row.requestsPerMinute === null && row.tokensPerMinute === null)) return null;
  return {
    budgetMicros: row.budgetMicros,
    hardStop: row.hardStop,
    requestsPerMinute: row.requestsPerMinute,
    tokensPerMinute: row.tokensPerMinute,
    limitsVersion: row.rateLimitsUpdatedAt?.getTime() ?? 0,
  };
}

const keyOf = (projectId: string, customer: string) => `${projectId}\n${customer}`;

/**
 * In-process cache of the customers' bounds (CONTRACT §22), so that a steady-state inference naming a customer reads
 * no SQL for them: a PUT of a customer's budget or limits evicts it here and, over the bus, on every other replica.
 */
export class CustomerCache implements CustomerPolicies {
  private readonly entries: LRUCache<string, Entry>;

  constructor(
    private readonly bus: Bus,
    load: (projectId: string, customer: string) => Promise<CustomerPolicy | null>,
    monotonicNow: () => number = () => performance.now(),
    ttlMs = CUSTOMER_CACHE_TTL_MS,
  ) {
    this.entries = loadingCache<Entry>({
      ttlMs,
      max: MAX_ENTRIES,
      now: monotonicNow,
      load: async (key) => {
        const at = key.indexOf('\n');
        return (await load(key.slice(0, at), key.slice(at + 1))) ?? NONE;
      },
    });
    bus.subscribe(CUSTOMERS_CHANGED, (key) => this.entries.delete(key));
    bus.onResync(() => this.entries.clear());
  }

  async get(projectId: string, customer: string): Promise<CustomerPolicy | null> {
    const entry = await readThrough(this.entries, keyOf(projectId, customer));
    return entry === undefined || 'none' in entry ? null : entry;
  }

  async invalidate(projectId: string, customer: string): Promise<void> {
    const key = keyOf(projectId, customer);
    this.entries.delete(key);
    await this.bus.publish(CUSTOMERS_CHANGED, key);
  }
}
