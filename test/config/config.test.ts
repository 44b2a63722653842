import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { ConfigError } from '../../src/config/environment.ts';

describe('configuration', () => {
  it('has the documented defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      host: '127.0.0.1',
      port: 8080,
      databaseUrl: null,
      redisUrl: null,
      masterKey: null,
      webhookRetryScheduleS: [0, 30, 120, 600, 3600, 21600],
      webhookRetryHorizonS: 86400,
      egressAllowlist: [],
      role: 'all',
    });
    expect(c.dataDir.endsWith('.svc-data')).toBe(true);
    expect(Object.isFrozen(c)).toBe(true);
  });

  const bad: [Record<string, string>, string][] = [
    [{ PORT: 'eighty' }, 'PORT'],
    [{ PORT: '70000' }, 'PORT'],
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL'],
    [{ REDIS_URL: 'not a url' }, 'REDIS_URL'],
    [{ SVC_MASTER_KEY: 'short' }, 'SVC_MASTER_KEY'],
    [{ SVC_MASTER_KEY: 'sk_live_0123456789012345678901234567890' }, 'SVC_MASTER_KEY'],
    [{ SVC_WEBHOOK_RETRY_SCHEDULE: '0,30,x' }, 'SVC_WEBHOOK_RETRY_SCHEDULE'],
    [{ SVC_WEBHOOK_RETRY_SCHEDULE: '0,30,10' }, 'SVC_WEBHOOK_RETRY_SCHEDULE'],
    [{ SVC_SMTP_URL: 'http://mail' }, 'SVC_SMTP_URL'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    [{ SVC_ENCRYPTION_KEY: 'abc' }, 'SVC_ENCRYPTION_KEY'],
    [{ SVC_ROLE: 'both' }, 'SVC_ROLE'],
    [{ SVC_ALERT_EMAIL_FROM: 'notanemail' }, 'SVC_ALERT_EMAIL_FROM'],
    [{ SVC_ALERT_EMAIL_TO: 'a@b.example,nope' }, 'SVC_ALERT_EMAIL_TO'],
    [{ SVC_MASTER_KEY: 'svc_sk_has spaces and more characters !!!' }, 'SVC_MASTER_KEY'],
    // The api and worker processes share usage through Redis and PostgreSQL: neither may be missing.
    [{ SVC_ROLE: 'api' }, 'SVC_ROLE'],
    [{ SVC_ROLE: 'worker', REDIS_URL: 'redis://127.0.0.1:6379' }, 'SVC_ROLE'],
    [{ SVC_ROLE: 'api', DATABASE_URL: 'postgresql://db/x' }, 'SVC_ROLE'],
  ];
  for (const [env, variable] of bad) {
    it(`names ${variable} when it is wrong (${JSON.stringify(env)})`, () => {
      let error: unknown;
      try {
        loadConfig(env);
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).variable).toBe(variable);
      expect((error as Error).message.startsWith(`${variable}: `)).toBe(true);
    });
  }
});

describe('configuration messages and decoding (the environment schema)', () => {
  const message = (env: Record<string, string>) => {
    try {
      loadConfig(env);
    } catch (err) {
      return (err as Error).message;
    }
    return 'accepted';
  };

  it.each([
    [{ PORT: 'eighty' }, 'PORT: must be a whole number, got "eighty"'],
    [{ PORT: '1.5' }, 'PORT: must be a whole number, got "1.5"'],
    [{ PORT: '-1' }, 'PORT: must be a whole number, got "-1"'],
    [{ PORT: '70000' }, 'PORT: must be between 0 and 65535, got 70000'],
    [{ SVC_OUTCOME_LEASE_MS: '499' }, 'SVC_OUTCOME_LEASE_MS: must be between 500 and 3600000, got 499'],
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL: must start with postgresql:// or postgres://'],
    [{ REDIS_URL: 'not a url' }, 'REDIS_URL: is not a valid URL'],
    [{ SVC_PUBLIC_URL: 'ftp://x' }, 'SVC_PUBLIC_URL: must start with http:// or https://'],
    [{ SVC_GRAPHQL_INTROSPECTION: 'maybe' }, 'SVC_GRAPHQL_INTROSPECTION: must be true or false, got "maybe"'],
    [{ SVC_ROLE: 'Both' }, 'SVC_ROLE: must be all, api or worker, got "both"'],
    [{ LOG_LEVEL: 'INFO' }, 'LOG_LEVEL: must be one of fatal, error, warn, info, debug, trace, silent'],
    [{ SVC_ALERT_EMAIL_FROM: 'notanemail' }, 'SVC_ALERT_EMAIL_FROM: "notanemail" is not an e-mail address'],
    [{ SVC_ALERT_EMAIL_TO: 'a@b.example,nope' }, 'SVC_ALERT_EMAIL_TO: "nope" is not an e-mail address; use comma-separated addresses'],
    [{ SVC_WEBHOOK_RETRY_SCHEDULE: '0,30,' }, 'SVC_WEBHOOK_RETRY_SCHEDULE: must be comma-separated whole seconds, e.g. 0,30,120'],
    [{ SVC_WEBHOOK_RETRY_SCHEDULE: '0,30,10' }, 'SVC_WEBHOOK_RETRY_SCHEDULE: delays must not decrease'],
    [{ SVC_EGRESS_ALLOWLIST: '300.1.1.1/99' }, expect.stringMatching(/^SVC_EGRESS_ALLOWLIST: .*; use comma-separated hostnames, IPs or CIDRs$/)],
  ])('refuses %j with one precise line', (env, expected) => {
    expect(message(env)).toEqual(expected);
  });

  it('trims values, reads blank as unset, and decodes each by its type', () => {
    const c = loadConfig({
      PORT: ' 8081 ',
      HOST: '  ',
      DATABASE_URL: 'POSTGRES://db/x',
      REDIS_URL: 'redis://cache:6379',
      SVC_PUBLIC_URL: 'https://gw.example///',
      SVC_GRAPHQL_INTROSPECTION: 'Off',
      SVC_ROLE: 'Worker',
      SVC_WEBHOOK_RETRY_SCHEDULE: ' 0 , 5 ,5',
      SVC_ALERT_EMAIL_TO: 'a@b.example, c@d.example,,',
      SVC_EGRESS_ALLOWLIST: 'hooks.corp, 10.0.0.0/8',
    });
    expect(c).toMatchObject({
      port: 8081,
      host: '127.0.0.1',
      databaseUrl: 'POSTGRES://db/x',
      publicUrl: 'https://gw.example',
      graphqlIntrospection: false,
      role: 'worker',
      webhookRetryScheduleS: [0, 5, 5],
      alertEmailTo: ['a@b.example', 'c@d.example'],
      egressAllowlist: ['hooks.corp', '10.0.0.0/8'],
    });
  });

  it('defaults introspection from NODE_ENV', () => {
    expect(loadConfig({}).graphqlIntrospection).toBe(true);
    expect(loadConfig({ NODE_ENV: 'production' }).graphqlIntrospection).toBe(false);
    expect(loadConfig({ NODE_ENV: 'production', SVC_GRAPHQL_INTROSPECTION: 'yes' }).graphqlIntrospection).toBe(true);
  });
});
