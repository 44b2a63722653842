import type { Db } from '../../db/client.ts';

/** A console session as stored: only digests of the cookie's token and of the CSRF token, never the tokens. */
export interface SessionRecord {
  id: string;
  tokenHash: string;
  csrfHash: string;
  operatorId: string;
  method: string;
  ip: string | null;
  createdAt: number;
  lastSeenAt: number;
  /** The absolute timeout (ms since the epoch). */
  expiresAt: number;
}

/**
 * Where sessions live (CONTRACT §17: server-side): PostgreSQL (or the embedded database) without REDIS_URL, Redis with
 * it (RedisSessionStore, redis/session-store.ts). Every replica reads the same store on every request, so a session
 * ended anywhere is ended everywhere at once.
 */
export interface SessionStore {
  create(session: SessionRecord): Promise<void>;
  find(tokenHash: string): Promise<SessionRecord | null>;
  touch(tokenHash: string, lastSeenAt: number): Promise<void>;
  /** Ends one session; false when it was already gone. */
  remove(tokenHash: string): Promise<boolean>;
  /** Ends every session of an operator; returns the ended ones. */
  removeForOperator(operatorId: string): Promise<SessionRecord[]>;
}

export class PrismaSessionStore implements SessionStore {
  constructor(private readonly db: Db) {}

  async create(s: SessionRecord): Promise<void> {
    await this.db.operatorSession.create({
      data: { ...s, createdAt: new Date(s.createdAt), lastSeenAt: new Date(s.lastSeenAt), expiresAt: new Date(s.expiresAt) },
    });
  }

  async find(tokenHash: string): Promise<SessionRecord | null> {
    const row = await this.db.operatorSession.findUnique({ where: { tokenHash } });
    return row
      ? { ...row, createdAt: row.createdAt.getTime(), lastSeenAt: row.lastSeenAt.getTime(), expiresAt: row.expiresAt.getTime() }
      : null;
  }

  async touch(tokenHash: string, lastSeenAt: number): Promise<void> {
    await this.db.operatorSession.updateMany({ where: { tokenHash }, data: { lastSeenAt: new Date(lastSeenAt) } });
  }

  async remove(tokenHash: string): Promise<boolean> {
    return (await this.db.operatorSession.deleteMany({ where: { tokenHash } })).count > 0;
  }

  async removeForOperator(operatorId: string): Promise<SessionRecord[]> {
    const rows = await this.db.operatorSession.findMany({ where: { operatorId } });
    await this.db.operatorSession.deleteMany({ where: { operatorId } });
    return rows.map((row) => ({ ...row, createdAt: row.createdAt.getTime(), lastSeenAt: row.lastSeenAt.getTime(), expiresAt: row.expiresAt.getTime() }));
  }
}
