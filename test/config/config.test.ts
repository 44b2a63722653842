import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/config.ts';

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
