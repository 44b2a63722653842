import pg from 'pg';
import type { Logger } from 'pino';
import type { Database } from '../../db/client.ts';
import { WAKE_CHANNEL } from '../../domain/webhooks/wakeups.ts';

/** Subscribes `onWake` to the channel: LISTEN on a dedicated connection (PostgreSQL) or on the embedded PGlite. */
export async function listenForWakeups(
  database: Database,
  databaseUrl: string | null,
  onWake: () => void,
  log: Logger,
): Promise<() => Promise<void>> {
  if (database.kind === 'pglite') {
    const unlisten = await database.pglite!.listen(WAKE_CHANNEL, (payload) => {
      if (payload === database.schema) onWake();
    });
    return unlisten;
  }
  const listener = new PgListener(databaseUrl!, database.schema, onWake, log);
  await listener.connect();
  return () => listener.close();
}

/** A LISTEN connection that reconnects; after a reconnect it wakes the worker, as notifications may have been missed. */
class PgListener {
  private client: pg.Client | null = null;
  private closed = false;
  private retry: NodeJS.Timeout | null = null;

  constructor(
    private readonly databaseUrl: string,
    private readonly schema: string,
    private readonly onWake: () => void,
    private readonly log: Logger,
  ) {}

  async connect(): Promise<void> {
    const url = new URL(this.databaseUrl);
    url.searchParams.delete('schema');
    const client = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: 5_000 });
    client.on('notification', (n) => {
      if (n.channel === WAKE_CHANNEL && n.payload === this.schema) this.onWake();
    });
    client.on('error', (err) => {
      this.log.warn({ err: err.message }, 'webhook wake-up listener lost its connection; reconnecting');
      this.reconnectSoon(client);
    });
    client.on('end', () => this.reconnectSoon(client));
    await client.connect();
    await client.query(`LISTEN ${WAKE_CHANNEL}`);
    this.client = client;
  }

  private reconnectSoon(failed: pg.Client): void {
    if (this.closed || this.client !== failed || this.retry) return;
    this.client = null;
    void failed.end().catch(() => {});
    this.retry = setTimeout(() => {
      this.retry = null;
      if (this.closed) return;
      this.connect().then(
        () => this.onWake(),
        (err: Error) => {
          this.log.warn({ err: err.message }, 'webhook wake-up listener cannot reconnect; polling meanwhile');
          this.client = failed;
          this.reconnectSoon(failed);
        },
      );
    }, 1_000);
    this.retry.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retry) clearTimeout(this.retry);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => {});
  }
}
