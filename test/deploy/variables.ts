import { EnvironmentSchema } from '../../src/config/environment.ts';

/**
 * The configuration variables that are secrets (docs/OPERATIONS.md "Kubernetes"): they go in the Secret (Kubernetes)
 * or come from the shell (compose), never in a ConfigMap or a literal value. A URL is a secret because it may carry
 * a password.
 */
export const SECRET_VARIABLES = new Set([
  'DATABASE_URL',
  'DATABASE_DIRECT_URL',
  'DATABASE_READ_URL',
  'REDIS_URL',
  'SVC_MASTER_KEY',
  'SVC_ENCRYPTION_KEY',
  'SVC_METRICS_TOKEN',
  'SVC_SMTP_URL',
  'SVC_OIDC_CLIENT_SECRET',
  'SVC_SCIM_TOKEN',
  'SVC_SCIM_TOKEN_SHA256',
]);

/** Variables of the configuration schema whose names say secret: each must be in SECRET_VARIABLES. */
export const secretLooking = () =>
  Object.keys(EnvironmentSchema.properties).filter((n) => /SECRET|TOKEN|PASSWORD|_KEY$|^(DATABASE|REDIS)_.*URL$/.test(n));

/**
 * The committed examples' placeholders filled with values of the right shape, so that loadConfig can check the rest:
 * `<openssl rand -hex N>` becomes 2N hex digits, any other `<…>` a word.
 */
export function fillPlaceholders(env: Record<string, string>): Record<string, string> {
  const fill = (v: string) => v.replace(/<([^>]*)>/g, (_, what: string) => {
    const hex = /-hex (\d+)/.exec(what);
    return hex ? 'ab'.repeat(Number(hex[1])) : 'placeholder';
  });
  return Object.fromEntries(Object.entries(env).map(([k, v]) => [k, fill(v)]));
}
