import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { DRAIN_MARGIN_MS } from '../../src/api/server-lifecycle.ts';
import { loadConfig } from '../../src/config/config.ts';
import { EnvironmentSchema } from '../../src/config/environment.ts';
import { PROJECT_ROOT } from '../../src/project-root.ts';
import { applyOp, podSpecOf, readExampleSecrets, renderKustomization, type Container, type K8sObject } from './kustomize.ts';
import { fillPlaceholders, SECRET_VARIABLES, secretLooking } from './variables.ts';

/**
 * deploy/kubernetes without a cluster (neither kubectl, kustomize, helm nor kubeconform is packaged here): every
 * overlay rendered (./kustomize.ts), every object validated against the Kubernetes OpenAPI schemas that
 * kubernetes-models compiles, and what the gateway needs of them checked against its own code: the variables against
 * the configuration schema (and loadConfig), the probes against its health routes, the grace period against its drain.
 */
const KUBE = path.join(PROJECT_ROOT, 'deploy/kubernetes');
const OVERLAYS = readdirSync(path.join(KUBE, 'overlays')).sort();
const render = (overlay: string) => renderKustomization(path.join(KUBE, 'overlays', overlay), { readFile: readExampleSecrets });
const KNOWN = new Set(Object.keys(EnvironmentSchema.properties));
/** What the Kubernetes schemas compiled into kubernetes-models say of an object; null when it validates. */
async function schemaProblem(object: K8sObject): Promise<string | null> {
  const group = object.apiVersion.includes('/') ? object.apiVersion : `v1`;
  const module = (await import(/* @vite-ignore */ `kubernetes-models/${group}/${object.kind}`)) as Record<string, new (data: unknown) => { validate(): void }>;
  const Model = module[object.kind];
  if (!Model) return `kubernetes-models has no ${object.apiVersion} ${object.kind}`;
  try {
    new Model(object).validate();
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

const byKind = (objects: K8sObject[], kind: string) => objects.filter((o) => o.kind === kind);
const one = (objects: K8sObject[], kind: string, name: string) => {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name}`);
  return found;
};
const gatewayOf = (deployment: K8sObject): Container => podSpecOf(deployment)!.containers.find((c) => c.name === 'gateway')!;
const decoded = (secret: K8sObject) =>
  Object.fromEntries(Object.entries(secret.data as Record<string, string>).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]));

/** The environment a container starts with: its envFrom ConfigMaps and Secrets, then its own env (which wins). */
function environmentOf(objects: K8sObject[], container: Container): Record<string, string> {
  const env: Record<string, string> = {};
  for (const from of container.envFrom ?? []) {
    if (from.configMapRef) Object.assign(env, one(objects, 'ConfigMap', from.configMapRef.name).data);
    if (from.secretRef) Object.assign(env, decoded(one(objects, 'Secret', from.secretRef.name)));
  }
  for (const e of container.env ?? []) if (e.value !== undefined) env[e.name] = e.value;
  return env;
}

const mebibytes = (q: string) => {
  const m = /^(\d+)(Mi|Gi)$/.exec(q);
  if (!m) throw new Error(`memory quantity ${q}: write it in Mi or Gi`);
  return Number(m[1]) * (m[2] === 'Gi' ? 1024 : 1);
};

describe('deploy/kubernetes', () => {
  it('has a single and a cluster overlay', () => {
    expect(OVERLAYS).toEqual(['cluster', 'single']);
  });

  it('keeps the deployer\'s secrets.env out of git', () => {
    expect(readFileSync(path.join(KUBE, '.gitignore'), 'utf8').split('\n')).toContain('secrets.env');
  });

  describe.each(OVERLAYS)('overlay %s', (overlay) => {
    const objects = render(overlay);
    const api = one(objects, 'Deployment', 'svc-gateway-api');
    const worker = one(objects, 'Deployment', 'svc-gateway-worker');
    const deployments = [api, worker];

    it('renders the api and worker Deployments, a Service, a PodDisruptionBudget, an autoscaler, a ConfigMap and a Secret', () => {
      expect(objects.map((o) => `${o.apiVersion} ${o.kind}`).sort()).toEqual([
        'apps/v1 Deployment',
        'apps/v1 Deployment',
        'autoscaling/v2 HorizontalPodAutoscaler',
        'policy/v1 PodDisruptionBudget',
        'v1 ConfigMap',
        'v1 Secret',
        'v1 Service',
      ]);
      for (const o of objects) expect(o.metadata.namespace, `${o.kind} ${o.metadata.name}`).toBe('svc-gateway');
    });

    it('validates every object against the Kubernetes schemas', async () => {
      for (const object of objects) expect(await schemaProblem(object), `${object.kind} ${object.metadata.name}`).toBeNull();
    });

    it('names only variables the gateway reads, and each configuration loads', () => {
      for (const cm of byKind(objects, 'ConfigMap')) for (const name of Object.keys(cm.data as object)) expect(KNOWN.has(name), `ConfigMap ${name}`).toBe(true);
      for (const s of byKind(objects, 'Secret')) for (const name of Object.keys(s.data as object)) expect(KNOWN.has(name), `Secret ${name}`).toBe(true);
      for (const d of deployments) {
        const container = gatewayOf(d);
        for (const e of container.env ?? []) expect(KNOWN.has(e.name), `${d.metadata.name} env ${e.name}`).toBe(true);
        // Every ConfigMap and Secret a pod names is in the rendering (the generated names carry their hash).
        for (const from of container.envFrom ?? []) {
          if (from.configMapRef) one(objects, 'ConfigMap', from.configMapRef.name);
          if (from.secretRef) one(objects, 'Secret', from.secretRef.name);
        }
        const env = fillPlaceholders(environmentOf(objects, container));
        const config = loadConfig(env);
        expect(config.role).toBe(d === api ? 'api' : 'worker');
        // Not the embedded database (SVC_DATA_DIR is on the read-only root) and no generated key file either.
        expect(config.databaseUrl).not.toBeNull();
        expect(config.encryptionKey).not.toBeNull();
        expect(config.masterKey).not.toBeNull();
        expect(config.host).toBe('0.0.0.0');
        for (const port of container.ports as { name: string; containerPort: number }[]) expect(port.containerPort).toBe(config.port);
      }
    });

    it('keeps secrets in the Secret only', () => {
      const [secret] = byKind(objects, 'Secret');
      for (const name of Object.keys(secret!.data as object)) expect(SECRET_VARIABLES.has(name), `${name} is not a secret`).toBe(true);
      for (const name of ['DATABASE_URL', 'SVC_MASTER_KEY', 'SVC_ENCRYPTION_KEY']) expect(Object.keys(secret!.data as object)).toContain(name);
      for (const cm of byKind(objects, 'ConfigMap')) for (const name of Object.keys(cm.data as object)) expect(SECRET_VARIABLES.has(name), `ConfigMap ${name}`).toBe(false);
      for (const d of deployments) {
        for (const e of gatewayOf(d).env ?? []) expect(SECRET_VARIABLES.has(e.name) && e.value !== undefined, `${d.metadata.name} ${e.name}`).toBe(false);
      }
      // The committed example holds placeholders only: the gateway refuses to start on them.
      const example = decoded(secret!);
      for (const name of ['SVC_MASTER_KEY', 'SVC_ENCRYPTION_KEY']) {
        expect(example[name]).toMatch(/<[^>]+>/);
        expect(() => loadConfig({ [name]: example[name] })).toThrow(name);
      }
    });

    it('probes /healthz for liveness and start-up and /readyz for readiness, on the port the gateway listens on', () => {
      for (const d of deployments) {
        const c = gatewayOf(d);
        const probe = (name: string) => (c[name] as { httpGet: { path: string; port: string } } | undefined)?.httpGet;
        expect(probe('livenessProbe')?.path).toBe('/healthz');
        expect(probe('startupProbe')?.path).toBe('/healthz');
        expect(probe('readinessProbe')?.path).toBe('/readyz');
        const ports = (c.ports as { name: string }[]).map((p) => p.name);
        for (const name of ['livenessProbe', 'startupProbe', 'readinessProbe']) expect(ports).toContain(probe(name)!.port);
      }
    });

    it('sends traffic to the api pods only: the Service, the PodDisruptionBudget and the autoscaler are the api\'s', () => {
      const labelsOf = (d: K8sObject) => (d.spec as { template: { metadata: { labels: Record<string, string> } } }).template.metadata.labels;
      const selects = (selector: Record<string, string>, d: K8sObject) => Object.entries(selector).every(([k, v]) => labelsOf(d)[k] === v);
      const services = byKind(objects, 'Service');
      expect(services).toHaveLength(1);
      const selector = (services[0]!.spec as { selector: Record<string, string> }).selector;
      expect(selects(selector, api)).toBe(true);
      expect(selects(selector, worker)).toBe(false);
      const [pdb] = byKind(objects, 'PodDisruptionBudget');
      const pdbSelector = (pdb!.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels;
      expect([selects(pdbSelector, api), selects(pdbSelector, worker)]).toEqual([true, false]);
      const [hpa] = byKind(objects, 'HorizontalPodAutoscaler');
      expect((hpa!.spec as { scaleTargetRef: unknown }).scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: 'svc-gateway-api' });
      expect((hpa!.spec as { metrics: { resource: { name: string } }[] }).metrics.map((m) => m.resource.name)).toEqual(['cpu']);
      // Replicas are the autoscaler's: a replica count in the Deployment would reset them at every apply.
      expect((api.spec as { replicas?: number }).replicas).toBeUndefined();
    });

    it('runs as non-root on a read-only root, with requests and limits above the heap the start flags allow', () => {
      const heapMb = Number(/--max-old-space-size=(\d+)/.exec(JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')).scripts.start)![1]);
      for (const d of deployments) {
        const pod = podSpecOf(d)!;
        // The image's own user (Dockerfile: useradd --uid), so the files it owns are its.
        const uid = Number(/useradd [^\n]*--uid (\d+)/.exec(readFileSync(path.join(PROJECT_ROOT, 'Dockerfile'), 'utf8'))![1]);
        expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: uid });
        const c = gatewayOf(d) as Container & { securityContext: Record<string, unknown>; resources: { requests: Record<string, string>; limits: Record<string, string> } };
        expect(c.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
        expect(c.image).toMatch(/svc-gateway:/);
        // docs/OPERATIONS.md "Memory": under 250 MB resident under load on PostgreSQL, the heap capped by the flags.
        expect(mebibytes(c.resources.requests.memory!)).toBeGreaterThan(heapMb);
        expect(mebibytes(c.resources.limits.memory!) * 1.048576).toBeGreaterThan(250);
        expect(c.resources.requests.cpu).toBeDefined();
      }
    });

    it('gives SIGTERM time for the drain and the last usage write', () => {
      for (const d of deployments) {
        const env = fillPlaceholders(environmentOf(objects, gatewayOf(d)));
        const config = loadConfig(env);
        const pod = podSpecOf(d)! as { terminationGracePeriodSeconds?: number };
        const preStop = (gatewayOf(d) as { lifecycle?: { preStop?: { exec: { command: string[] } } } }).lifecycle?.preStop?.exec.command;
        const preStopS = preStop ? Number(preStop[1]) : 0;
        // docs/CONFIGURATION.md "Start-up errors and shutdown": the drain, then at most 15 s for the buffered usage.
        const needS = preStopS + (config.routingTimeoutMs + DRAIN_MARGIN_MS) / 1000 + 15;
        expect(pod.terminationGracePeriodSeconds, d.metadata.name).toBeGreaterThanOrEqual(needS);
      }
    });
  });

  it('cluster: Redis Cluster seed nodes and no REDIS_URL; DATABASE_URL through PgBouncer, DATABASE_DIRECT_URL direct', () => {
    const objects = render('cluster');
    const env = environmentOf(objects, gatewayOf(one(objects, 'Deployment', 'svc-gateway-api')));
    expect(env.REDIS_URL).toBeUndefined();
    expect(env.REDIS_CLUSTER_NODES!.split(',').length).toBeGreaterThanOrEqual(3);
    for (const node of env.REDIS_CLUSTER_NODES!.split(',')) expect(node).toMatch(/^[a-z0-9.-]+:\d+$/);
    expect(new URL(env.DATABASE_URL!).host).toMatch(/^pgbouncer\..*:6432$/);
    expect(new URL(env.DATABASE_DIRECT_URL!).host).toMatch(/^postgres\..*:5432$/);
    expect((one(objects, 'Deployment', 'svc-gateway-worker').spec as { replicas: number }).replicas).toBe(2);
  });

  it('single: one Redis server and PostgreSQL direct', () => {
    const objects = render('single');
    const env = environmentOf(objects, gatewayOf(one(objects, 'Deployment', 'svc-gateway-api')));
    expect(env.REDIS_URL).toMatch(/^redis:\/\//);
    expect(env.REDIS_CLUSTER_NODES).toBeUndefined();
    expect(env.DATABASE_DIRECT_URL).toBeUndefined();
  });

  it('the base holds the two Deployments, the Service, the disruption budget and the autoscaler; the overlays the Secret', () => {
    const base = parseYaml(readFileSync(path.join(KUBE, 'base/kustomization.yaml'), 'utf8')) as { resources: string[] };
    expect(base.resources.sort()).toEqual(['api.yaml', 'hpa.yaml', 'pdb.yaml', 'service.yaml', 'worker.yaml']);
  });
});

describe('the renderer (test/deploy/kustomize.ts)', () => {
  it('applies RFC 6902 add, replace, remove and test, and refuses a path that is not there', () => {
    const doc = { spec: { replicas: 1, list: ['a'], labels: { 'a/b': 'x' } } };
    applyOp(doc, { op: 'replace', path: '/spec/replicas', value: 2 });
    applyOp(doc, { op: 'add', path: '/spec/list/-', value: 'b' });
    applyOp(doc, { op: 'remove', path: '/spec/labels/a~1b' });
    applyOp(doc, { op: 'test', path: '/spec/replicas', value: 2 });
    expect(doc).toEqual({ spec: { replicas: 2, list: ['a', 'b'], labels: {} } });
    expect(() => applyOp(doc, { op: 'replace', path: '/spec/nothing', value: 1 })).toThrow('no such value');
    expect(() => applyOp(doc, { op: 'test', path: '/spec/replicas', value: 3 })).toThrow('failed');
  });

  it('gives generated names a content hash and rewrites the references, so a changed value rolls the pods', () => {
    const a = render('single');
    const b = renderKustomization(path.join(KUBE, 'overlays/single'), {
      readFile: (f) => readExampleSecrets(f).replace('LOG_LEVEL=info', 'LOG_LEVEL=debug'),
    });
    const cmName = (objects: K8sObject[]) => byKind(objects, 'ConfigMap')[0]!.metadata.name;
    expect(cmName(a)).toMatch(/^svc-gateway-config-[a-z0-9]{10}$/);
    expect(cmName(b)).not.toBe(cmName(a));
    expect(gatewayOf(one(b, 'Deployment', 'svc-gateway-api')).envFrom![0]!.configMapRef!.name).toBe(cmName(b));
  });
});

describe('the secret variables (test/deploy/variables.ts)', () => {
  it('include every variable of the configuration whose name says secret', () => {
    for (const name of secretLooking()) expect(SECRET_VARIABLES.has(name), name).toBe(true);
    for (const name of SECRET_VARIABLES) expect(KNOWN.has(name), `${name} is not a configuration variable`).toBe(true);
  });
});
