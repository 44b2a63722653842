import type { DirectSession } from './direct-session.ts';

/**
 * Which process runs a background sweep (CONTRACT §18: retention, approval expiry, daily summaries, partition upkeep
 * run on one replica at a time). Each sweep asks `lead(name)` on each of its ticks and runs only on `true`.
 */
export interface Leadership {
  /** True while this process leads `name` (taking the lead when no live process has it), else false. */
  lead(name: string): Promise<boolean>;
  /** Gives the lead of `name` up (its sweep stopped): another process takes it on its next tick. */
  release(name: string): Promise<void>;
}

/** The embedded database has one process: it leads everything. */
export const soleLeader: Leadership = { lead: async () => true, release: async () => {} };

/** First key of the sweeps' advisory locks (the migrations' lock uses another). */
const LEADER_CLASS_ID = 0x5356434c;

/**
 * A session-level advisory lock per sweep and schema, held on the process's direct session (db/direct-session.ts):
 * the lead lives exactly as long as that connection. A process that dies (crash, kill -9, OOM) closes it and
 * PostgreSQL releases the lock at once; a host that vanishes is noticed by the server's keepalives within
 * DEAD_PEER_S. Another process asks on each of its ticks, so it takes over within one sweep period of the release.
 * A holder checks its connection on each tick (one `SELECT 1`), so it never runs a sweep after losing the lock.
 */
export class AdvisoryLeadership implements Leadership {
  /** The sweeps led, by the session generation their lock was taken in. */
  private readonly held = new Map<string, number>();

  constructor(
    private readonly session: DirectSession,
    /** Schemas sharing one database (tests) lead apart. */
    private readonly schema: string,
  ) {}

  async lead(name: string): Promise<boolean> {
    const gen = this.held.get(name);
    try {
      if (gen !== undefined && gen === this.session.generation && this.session.connected) {
        await this.session.query('SELECT 1');
        if (this.session.generation === gen) return true;
      }
      this.held.delete(name);
      const [row] = await this.session.query<{ ok: boolean; pid: number }>(
        'SELECT pg_try_advisory_lock($1, hashtext($2)) AS ok, pg_backend_pid() AS pid',
        [LEADER_CLASS_ID, `${this.schema}:${name}`],
      );
      // Taken on a connection that has since been replaced: gone with it.
      if (!row?.ok || row.pid !== this.session.pid) return false;
      this.held.set(name, this.session.generation);
      return true;
    } catch {
      this.held.delete(name);
      return false;
    }
  }

  async release(name: string): Promise<void> {
    const gen = this.held.get(name);
    this.held.delete(name);
    if (gen === undefined || gen !== this.session.generation || !this.session.connected) return;
    await this.session.query('SELECT pg_advisory_unlock($1, hashtext($2))', [LEADER_CLASS_ID, `${this.schema}:${name}`]).catch(() => {});
  }
}
