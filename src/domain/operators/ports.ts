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
  /** What the Operators screen shows of the sign-in configuration (directory.ts); absent: nothing configured. */
  signIn?: SignInSettings;
}

/** The sign-in configuration without its secrets (no client secret, IdP certificate or SCIM token). */
export interface SignInSettings {
  oidc: { issuer: string; clientId: string; usernameClaim: string; scopes: string; redirectUri: string } | null;
  saml: { entryPoint: string; entityId: string; acsUrl: string; metadataUrl: string } | null;
  /** null: SCIM is off (SVC_SCIM_TOKEN unset). */
  scim: { baseUrl: string } | null;
  /** SVC_CONSOLE_IP_ALLOWLIST; empty: any address. */
  consoleIpAllowlist: string[];
}

/** The request's facts before there is a caller (sign-in, SCIM). */
export interface RequestFacts {
  requestId: string;
  ip: string | null;
}
