import type { Db } from '../../db/client.ts';
import type { CidrList } from '../../kernel/cidr.ts';
import type { Clock } from '../../kernel/clock.ts';
import type { WarnLog } from '../keys/ports.ts';
import type { SessionStore } from './session-store.ts';

/** CONTRACT §17: the session timeouts and the console's IP allowlist (README "Operators: SSO, SCIM, sessions"). */
export interface SessionSettings {
  idleTimeoutMs: number;
  absoluteTimeoutMs: number;
  /** Empty: any address. */
  consoleAllowlist: CidrList;
}

/** What the operators capability needs from outside the domain. */
export interface OperatorPorts {
  db: Db;
  sessions: SessionStore;
  clock: Clock;
  log: WarnLog;
  settings: SessionSettings;
}

/** The request's facts before there is a caller (sign-in, SCIM). */
export interface RequestFacts {
  requestId: string;
  ip: string | null;
}
