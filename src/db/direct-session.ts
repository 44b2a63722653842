import pg from 'pg';

type Log = { warn(obj: object, msg: string): void };
/** Run on each connection; `pid` is that connection's backend process id. */
export type Step = (client: pg.Client, pid: number) => Promise<unknown>;

/**
 * How soon PostgreSQL notices that this session's peer vanished (a host lost without closing its sockets) and ends
 * it, releasing its advisory locks: 10 s idle, then 3 probes 5 s apart, and unacknowledged data for as long.
 */
export const DEAD_PEER_S = 25;
const KEEPALIVES = `SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3; SET tcp_user_timeout = ${DEAD_PEER_S * 1000}`;
const RECONNECT_MS = 1_000;

/**
 * The process's one session-mode PostgreSQL connection, on the direct URL (DATABASE_DIRECT_URL, else DATABASE_URL):
 * what a transaction-pooling PgBouncer cannot carry, the delivery worker's LISTEN and the sweeps' advisory locks.
 * Opened on first use, so a process that needs neither never holds it. A lost connection is opened again (1 s
 * apart, for as long as a step is registered); each registered step (LISTEN, SET application_name) runs again on
 * every connection, and `onReconnect` listeners hear of it (notifications may have been missed meanwhile; the
 * session's advisory locks were released with the old connection: `generation` tells connections apart). Statements
 * run one at a time (sweeps ask for their locks concurrently): pg refuses a query on a client still running one.
 */
export class DirectSession {
  private client: pg.Client | null = null;
  private connecting: Promise<pg.Client> | null = null;
  private retry: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly steps = new Set<Step>();
  private readonly notified = new Set<(channel: string, payload: string) => void>();
  private readonly reconnected = new Set<() => void>();
  /** The backend process id of the current connection (null while there is none). */
  pid: number | null = null;
  /** Counts connections: a lock taken in one generation is gone in the next. */
  generation = 0;

  constructor(
    private readonly url: string,
    private readonly log: Log,
  ) {}

  get connected(): boolean {
    return this.client !== null;
  }

  /** Hears every NOTIFY on the channels some step LISTENs to. */
  onNotification(listener: (channel: string, payload: string) => void): () => void {
    this.notified.add(listener);
    return () => this.notified.delete(listener);
  }

  /** Told after a lost connection was opened again (and every step ran on it). */
  onReconnect(listener: () => void): () => void {
    this.reconnected.add(listener);
    return () => this.reconnected.delete(listener);
  }

  /**
   * Runs `step` now (connecting first) and again on every later connection, until the returned function is called;
   * that runs `undo` on the connection of the moment.
   */
  async addStep(step: Step, undo?: (client: pg.Client) => Promise<unknown>): Promise<() => Promise<void>> {
    this.steps.add(step);
    try {
      await this.serially(async () => {
        const client = await this.open();
        // A connection opened while this step was being added ran it already.
        if (!this.ranOn.get(client)?.has(step)) await this.run(client, step, this.pid!);
      });
    } catch (err) {
      this.steps.delete(step);
      throw err;
    }
    return async () => {
      this.steps.delete(step);
      if (undo) await this.serially(async () => this.client && (await undo(this.client))).catch(() => {});
    };
  }

  /** One statement on the session (advisory locks); connects first. */
  query<R extends Record<string, unknown>>(text: string, values?: unknown[]): Promise<R[]> {
    return this.serially(async () => (await (await this.open()).query(text, values)).rows as R[]);
  }

  /** The session's statements, one after another (a connection opened meanwhile runs its steps before it is used). */
  private tail: Promise<unknown> = Promise.resolve();
  private serially<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn);
    this.tail = result.catch(() => {});
    return result;
  }

  /** Ends the connection (its locks and LISTENs with it) and stops reconnecting. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
    const client = this.client ?? (await this.connecting?.catch(() => null)) ?? null;
    this.client = null;
    this.pid = null;
    await client?.end().catch(() => {});
  }

  private readonly ranOn = new WeakMap<pg.Client, Set<Step>>();

  private async run(client: pg.Client, step: Step, pid: number): Promise<void> {
    await step(client, pid);
    let ran = this.ranOn.get(client);
    if (!ran) this.ranOn.set(client, (ran = new Set()));
    ran.add(step);
  }

  private open(): Promise<pg.Client> {
    if (this.closed) return Promise.reject(new Error('the direct database session is closed'));
    if (this.client) return Promise.resolve(this.client);
    this.connecting ??= this.connect().finally(() => (this.connecting = null));
    return this.connecting;
  }

  private async connect(): Promise<pg.Client> {
    const url = new URL(this.url);
    url.searchParams.delete('schema');
    const client = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: 5_000, keepAlive: true });
    client.on('notification', (n) => {
      for (const l of this.notified) l(n.channel, n.payload ?? '');
    });
    client.on('error', (err) => {
      if (this.client === client) this.log.warn({ err: err.message }, 'the direct database session lost its connection; reconnecting');
      this.lost(client);
    });
    client.on('end', () => this.lost(client));
    try {
      await client.connect();
      await client.query(KEEPALIVES);
      const [row] = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows;
      for (const step of this.steps) await this.run(client, step, row!.pid);
      if (this.closed) throw new Error('the direct database session is closed');
      this.client = client;
      this.pid = row!.pid;
      this.generation++;
      return client;
    } catch (err) {
      void client.end().catch(() => {});
      throw err;
    }
  }

  private lost(client: pg.Client): void {
    if (this.client !== client) return;
    this.client = null;
    this.pid = null;
    void client.end().catch(() => {});
    this.reconnectSoon();
  }

  private reconnectSoon(): void {
    if (this.closed || this.retry || this.steps.size === 0) return;
    this.retry = setTimeout(() => {
      this.retry = null;
      this.open().then(
        () => {
          for (const l of this.reconnected) l();
        },
        (err: Error) => {
          this.log.warn({ err: err.message }, 'the direct database session cannot reconnect; trying again');
          this.reconnectSoon();
        },
      );
    }, RECONNECT_MS);
    this.retry.unref();
  }
}
