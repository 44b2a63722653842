import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { DockerfileParser } from 'dockerfile-ast';
import { validate as lintDockerfile } from 'dockerfile-utils';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { EnvironmentSchema } from '../../src/config/environment.ts';
import { interpolate, mountedFile, readCompose, type ComposeService } from './compose.ts';
import { SECRET_VARIABLES } from './variables.ts';
import { PROJECT_ROOT } from '../../src/project-root.ts';

/**
 * compose.yaml's profile `cluster` without a container engine: what each service is, which variables the gateway gets
 * (against its configuration schema and loadConfig), and the files the containers mount. The Compose specification's
 * schema and the default profile are test/observability/deploy-files.test.ts's; the mounted Redis and PgBouncer files
 * run in real engines in compose-engines.test.ts.
 */
const { services } = readCompose();
const NODES = ['redis-node-1', 'redis-node-2', 'redis-node-3', 'redis-node-4', 'redis-node-5', 'redis-node-6'];
const KNOWN = new Set(Object.keys(EnvironmentSchema.properties));
const SHELL = {
  POSTGRES_PASSWORD: 'pw',
  SVC_MASTER_KEY: `svc_sk_${'a'.repeat(40)}`,
  SVC_ENCRYPTION_KEY: 'ab'.repeat(32),
};
const inProfile = (name: string) => Object.keys(services).filter((s) => services[s]!.profiles?.includes(name)).sort();
const envOf = (s: ComposeService) => Object.fromEntries(Object.entries(s.environment ?? {}).map(([k, v]) => [k, interpolate(String(v), SHELL)]));

describe('compose.yaml, profile cluster', () => {
  it('adds six Redis nodes, the one-shot cluster init, PgBouncer and an api and a worker; the default profile stays as it is', () => {
    expect(inProfile('cluster')).toEqual(['cluster-api', 'cluster-worker', 'pgbouncer', 'redis-cluster-init', ...NODES].sort());
    expect(Object.keys(services).filter((s) => !services[s]!.profiles).sort()).toEqual(['api', 'postgres', 'redis', 'worker']);
    // A service depends only on services that run with it: the default profile's or its own.
    for (const [name, s] of Object.entries(services)) {
      for (const dep of Object.keys(s.depends_on ?? {})) {
        const d = services[dep];
        expect(d, `${name} -> ${dep}`).toBeDefined();
        if (d!.profiles) expect(s.profiles, `${name} -> ${dep}`).toEqual(d!.profiles);
      }
    }
  });

  it('gives the gateway REDIS_CLUSTER_NODES, DATABASE_URL through PgBouncer and DATABASE_DIRECT_URL to PostgreSQL', () => {
    for (const name of ['cluster-api', 'cluster-worker']) {
      const s = services[name]!;
      const env = envOf(s);
      for (const variable of Object.keys(env)) expect(KNOWN.has(variable), `${name} ${variable}`).toBe(true);
      expect(env.SVC_ROLE).toBe(name.replace('cluster-', ''));
      expect(env.REDIS_URL).toBeUndefined();
      expect(env.REDIS_CLUSTER_NODES!.split(',')).toEqual(NODES.map((n) => `${n}:6379`));
      const pooled = new URL(env.DATABASE_URL!);
      const direct = new URL(env.DATABASE_DIRECT_URL!);
      expect([pooled.host, direct.host]).toEqual(['pgbouncer:6432', 'postgres:5432']);
      // The same database and role both ways: PgBouncer's [databases] entry names the database it forwards to.
      expect(pooled.pathname).toBe(direct.pathname);
      expect(pooled.username).toBe(direct.username);
      const config = loadConfig(env);
      expect(config.role).toBe(env.SVC_ROLE);
      expect(config.databaseDirectUrl).not.toBeNull();
      // Started with what it waits for: PostgreSQL, PgBouncer and a cluster that init has made.
      expect(s.depends_on).toEqual({
        postgres: { condition: 'service_healthy' },
        pgbouncer: { condition: 'service_healthy' },
        'redis-cluster-init': { condition: 'service_completed_successfully' },
      });
      // Secrets come from the shell, never written in the file.
      for (const [variable, raw] of Object.entries(s.environment ?? {})) {
        if (SECRET_VARIABLES.has(variable)) expect(String(raw), variable).toMatch(/\$\{[A-Z_]+:[?-]/);
      }
    }
    expect(services['cluster-api']!.ports).toEqual(['8081:8080']);
    expect(services['cluster-worker']!.ports).toBeUndefined();
    // Unset in the shell, compose refuses to start with the variable's message.
    expect(() => interpolate(services['cluster-api']!.environment!.SVC_MASTER_KEY!, {})).toThrow('SVC_MASTER_KEY: set SVC_MASTER_KEY');
  });

  it('runs each node on the shared cluster configuration, announcing its own service name', () => {
    for (const node of NODES) {
      const s = services[node]!;
      expect(s.image).toBe('redis:7');
      expect(s.command).toEqual(['redis-server', '/usr/local/etc/redis/redis.conf', '--cluster-announce-hostname', node]);
      expect(path.relative(PROJECT_ROOT, mountedFile(s, '/usr/local/etc/redis/redis.conf'))).toBe('deploy/compose/redis-cluster.conf');
    }
    const conf = readFileSync(mountedFile(services[NODES[0]!]!, '/usr/local/etc/redis/redis.conf'), 'utf8');
    for (const line of ['port 6379', 'cluster-enabled yes', 'cluster-preferred-endpoint-type hostname', 'appendonly yes']) expect(conf.split('\n')).toContain(line);
  });

  it('makes the cluster once all six nodes answer: three masters with a replica each', () => {
    const init = services['redis-cluster-init']!;
    expect(init.restart).toBe('no');
    expect(Object.keys(init.depends_on!).sort()).toEqual(NODES);
    for (const dep of Object.values(init.depends_on!)) expect(dep.condition).toBe('service_healthy');
    expect(init.command).toEqual(NODES.map((n) => `${n}:6379`));
    const script = readFileSync(mountedFile(init, init.entrypoint![1]!), 'utf8');
    expect(script).toMatch(/redis-cli --cluster create \$nodes --cluster-replicas 1 --cluster-yes/);
  });

  it('runs PgBouncer in transaction mode in front of the compose PostgreSQL, from an image that lints clean', () => {
    const pgb = services.pgbouncer!;
    const ini = readFileSync(mountedFile(pgb, '/etc/pgbouncer/pgbouncer.ini'), 'utf8');
    const setting = (key: string) => new RegExp(`^${key}\\s*=\\s*(.*)$`, 'm').exec(ini)?.[1];
    expect(setting('pool_mode')).toBe('transaction');
    expect(setting('listen_port')).toBe('6432');
    expect(setting('svc')).toBe(`host=postgres port=5432 dbname=${services.postgres!.environment!.POSTGRES_DB}`);
    expect(Object.keys(pgb.environment!)).toEqual(['POSTGRES_PASSWORD']);

    const context = path.join(PROJECT_ROOT, typeof pgb.build === 'string' ? pgb.build : pgb.build!.context);
    const text = readFileSync(path.join(context, 'Dockerfile'), 'utf8');
    expect(lintDockerfile(text).map((d) => `${d.range.start.line + 1}: ${d.message}`)).toEqual([]);
    const dockerfile = DockerfileParser.parse(text);
    for (const copy of dockerfile.getCOPYs()) {
      const args = copy.getArguments().map((a) => a.getValue());
      for (const source of args.slice(0, -1)) expect(existsSync(path.join(context, source)), `COPY ${source}`).toBe(true);
    }
    expect(dockerfile.getInstructions().find((i) => i.getKeyword() === 'USER')?.getArgumentsContent()).toBe('postgres');
  });
});
