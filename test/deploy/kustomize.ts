import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml, parseAllDocuments } from 'yaml';

/**
 * A renderer for the part of kustomize that deploy/kubernetes uses (neither kubectl nor kustomize is packaged here):
 * `resources` (files and directories), `namespace`, `images`, `configMapGenerator` / `secretGenerator` (`envs`,
 * `literals`; behavior create, merge, replace; a content-hash suffix on the generated name, rewritten into the
 * references to it) and `patches` given as RFC 6902 operations on a target kind and name. Any other field throws, so
 * a kustomization that outgrows it fails the test instead of rendering as something kustomize would not.
 */
export type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; [k: string]: unknown }; [k: string]: unknown };

export interface RenderOptions {
  /** Reads a file a kustomization names (env files); default: the file itself. */
  readFile?: (file: string) => string;
}

interface Rendered {
  objects: K8sObject[];
  /** The objects made by a generator (their names get the hash suffix at the end). */
  generated: Set<K8sObject>;
}

const KNOWN = new Set(['apiVersion', 'kind', 'resources', 'namespace', 'images', 'configMapGenerator', 'secretGenerator', 'patches']);

export function renderKustomization(dir: string, opts: RenderOptions = {}): K8sObject[] {
  const { objects, generated } = build(dir, opts.readFile ?? ((f) => readFileSync(f, 'utf8')));
  // Generated names get their suffix last, as kustomize does, and every reference follows.
  const renamed = new Map<string, string>();
  for (const object of generated) {
    const name = `${object.metadata.name}-${contentHash(object)}`;
    renamed.set(`${object.kind}/${object.metadata.name}`, name);
    object.metadata.name = name;
  }
  for (const object of objects) {
    const pod = podSpecOf(object);
    if (pod) renameReferences(pod, renamed);
  }
  return objects;
}

function build(dir: string, readFile: (file: string) => string): Rendered {
  const file = path.join(dir, 'kustomization.yaml');
  const k = parseYaml(readFileSync(file, 'utf8')) as Record<string, unknown>;
  for (const key of Object.keys(k)) if (!KNOWN.has(key)) throw new Error(`${file}: ${key} is not supported by this renderer`);
  if (k.apiVersion !== 'kustomize.config.k8s.io/v1beta1' || k.kind !== 'Kustomization') throw new Error(`${file}: not a v1beta1 Kustomization`);

  const objects: K8sObject[] = [];
  const generated = new Set<K8sObject>();
  for (const resource of (k.resources as string[] | undefined) ?? []) {
    const at = path.resolve(dir, resource);
    if (statSync(at).isDirectory()) {
      const sub = build(at, readFile);
      objects.push(...sub.objects);
      for (const g of sub.generated) generated.add(g);
    } else {
      for (const doc of parseAllDocuments(readFileSync(at, 'utf8'))) {
        if (doc.errors.length > 0) throw new Error(`${at}: ${doc.errors[0]!.message}`);
        const object = doc.toJS() as K8sObject | null;
        if (object) objects.push(object);
      }
    }
  }
  for (const [field, kind] of [['configMapGenerator', 'ConfigMap'], ['secretGenerator', 'Secret']] as const) {
    for (const gen of (k[field] as Generator[] | undefined) ?? []) generate(dir, kind, gen, objects, generated, readFile);
  }
  for (const patch of (k.patches as Patch[] | undefined) ?? []) applyPatch(file, patch, objects);
  if (typeof k.namespace === 'string') for (const object of objects) object.metadata.namespace = k.namespace;
  for (const image of (k.images as Image[] | undefined) ?? []) setImage(objects, image);
  const unique = new Set<string>();
  for (const o of objects) {
    const id = `${o.kind}/${o.metadata.name}`;
    if (unique.has(id)) throw new Error(`${file}: ${id} twice`);
    unique.add(id);
  }
  return { objects, generated };
}

interface Generator {
  name: string;
  behavior?: 'create' | 'merge' | 'replace';
  envs?: string[];
  literals?: string[];
  type?: string;
}

function generate(dir: string, kind: 'ConfigMap' | 'Secret', gen: Generator, objects: K8sObject[], generated: Set<K8sObject>, readFile: (f: string) => string): void {
  for (const key of Object.keys(gen)) if (!['name', 'behavior', 'envs', 'literals', 'type'].includes(key)) throw new Error(`${kind} generator ${gen.name}: ${key} is not supported`);
  const data: Record<string, string> = {};
  for (const env of gen.envs ?? []) Object.assign(data, parseEnvFile(path.join(dir, env), readFile(path.join(dir, env))));
  for (const literal of gen.literals ?? []) Object.assign(data, parseEnvFile('literal', literal));
  const encoded = kind === 'Secret' ? Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')])) : data;
  const behavior = gen.behavior ?? 'create';
  const existing = objects.find((o) => o.kind === kind && o.metadata.name === gen.name);
  if (behavior === 'create') {
    if (existing) throw new Error(`${kind} ${gen.name} exists: use behavior merge or replace`);
    const object: K8sObject = { apiVersion: 'v1', kind, metadata: { name: gen.name }, data: encoded };
    if (kind === 'Secret') object.type = gen.type ?? 'Opaque';
    objects.push(object);
    generated.add(object);
    return;
  }
  if (!existing || !generated.has(existing)) throw new Error(`${kind} ${gen.name}: behavior ${behavior} needs one generated by a resource`);
  existing.data = behavior === 'merge' ? { ...(existing.data as Record<string, string>), ...encoded } : encoded;
}

/** kustomize's env file: KEY=VALUE per line, the value as written; blank lines and lines starting with # skipped. */
export function parseEnvFile(name: string, text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.trimStart();
    if (line === '' || line.startsWith('#')) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) throw new Error(`${name}:${i + 1}: not KEY=VALUE`);
    out[line.slice(0, eq)] = line.slice(eq + 1);
  }
  return out;
}

interface Patch {
  target?: { kind?: string; name?: string };
  patch?: string;
}

function applyPatch(file: string, p: Patch, objects: K8sObject[]): void {
  const target = p.target ?? {};
  for (const key of Object.keys(target)) if (key !== 'kind' && key !== 'name') throw new Error(`${file}: patch target ${key} is not supported`);
  const ops = parseYaml(p.patch ?? '') as unknown;
  if (!Array.isArray(ops)) throw new Error(`${file}: only RFC 6902 patches (a list of operations) are supported`);
  const hits = objects.filter((o) => (target.kind === undefined || o.kind === target.kind) && (target.name === undefined || o.metadata.name === target.name));
  if (hits.length === 0) throw new Error(`${file}: patch target ${target.kind}/${target.name} matches nothing`);
  for (const object of hits) for (const op of ops as JsonPatchOp[]) applyOp(object, op);
}

type JsonPatchOp = { op: 'add' | 'remove' | 'replace' | 'test'; path: string; value?: unknown };

/** One RFC 6902 operation (add, remove, replace, test) on `doc`, in place. */
export function applyOp(doc: unknown, { op, path: pointer, value }: JsonPatchOp): void {
  const parts = pointer.split('/').slice(1).map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  const last = parts.pop();
  if (last === undefined) throw new Error(`patch path ${pointer}: the whole document`);
  let parent = doc as Record<string, unknown> | unknown[];
  for (const part of parts) {
    const next = (parent as Record<string, unknown>)[part];
    if (next === null || typeof next !== 'object') throw new Error(`patch path ${pointer}: ${part} does not exist`);
    parent = next as Record<string, unknown>;
  }
  const has = Array.isArray(parent) ? last !== '-' && Number(last) < parent.length : Object.hasOwn(parent, last);
  switch (op) {
    case 'add':
      if (Array.isArray(parent)) parent.splice(last === '-' ? parent.length : Number(last), 0, value);
      else parent[last] = value;
      return;
    case 'replace':
    case 'remove':
      if (!has) throw new Error(`patch ${op} ${pointer}: no such value`);
      if (op === 'replace') (parent as Record<string, unknown>)[last] = value;
      else if (Array.isArray(parent)) parent.splice(Number(last), 1);
      else delete parent[last];
      return;
    case 'test':
      if (JSON.stringify((parent as Record<string, unknown>)[last]) !== JSON.stringify(value)) throw new Error(`patch test ${pointer} failed`);
      return;
    default:
      throw new Error(`patch op ${String(op)} is not supported`);
  }
}

interface Image {
  name: string;
  newName?: string;
  newTag?: string;
}

function setImage(objects: K8sObject[], image: Image): void {
  for (const object of objects) {
    const pod = podSpecOf(object);
    for (const c of [...(pod?.containers ?? []), ...(pod?.initContainers ?? [])]) {
      const [, name, tag] = /^(.*?)(?::([^:/]+))?$/.exec(c.image ?? '') ?? [];
      if (name !== image.name) continue;
      c.image = `${image.newName ?? name}${image.newTag !== undefined ? `:${image.newTag}` : tag !== undefined ? `:${tag}` : ''}`;
    }
  }
}

export interface Container {
  name: string;
  image?: string;
  env?: { name: string; value?: string; valueFrom?: Record<string, { name?: string; key?: string }> }[];
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string } }[];
  [k: string]: unknown;
}
export interface PodSpec {
  containers: Container[];
  initContainers?: Container[];
  volumes?: { name: string; configMap?: { name: string }; secret?: { secretName: string } }[];
  [k: string]: unknown;
}

export function podSpecOf(object: K8sObject): PodSpec | null {
  if (['Deployment', 'StatefulSet', 'DaemonSet', 'Job'].includes(object.kind)) {
    return ((object.spec as { template?: { spec?: PodSpec } } | undefined)?.template?.spec) ?? null;
  }
  return null;
}

function renameReferences(pod: PodSpec, renamed: Map<string, string>): void {
  const to = (kind: string, name: string) => renamed.get(`${kind}/${name}`) ?? name;
  for (const c of [...pod.containers, ...(pod.initContainers ?? [])]) {
    for (const from of c.envFrom ?? []) {
      if (from.configMapRef) from.configMapRef.name = to('ConfigMap', from.configMapRef.name);
      if (from.secretRef) from.secretRef.name = to('Secret', from.secretRef.name);
    }
    for (const e of c.env ?? []) {
      const cm = e.valueFrom?.configMapKeyRef;
      if (cm?.name) cm.name = to('ConfigMap', cm.name);
      const s = e.valueFrom?.secretKeyRef;
      if (s?.name) s.name = to('Secret', s.name);
    }
  }
  for (const v of pod.volumes ?? []) {
    if (v.configMap) v.configMap.name = to('ConfigMap', v.configMap.name);
    if (v.secret) v.secret.secretName = to('Secret', v.secret.secretName);
  }
}

/** A suffix from the content, as kustomize derives one: SHA-256 of the kind, name, type and data, 10 characters. */
function contentHash(object: K8sObject): string {
  const sorted = (o: unknown) => Object.fromEntries(Object.entries((o ?? {}) as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)));
  const body =
    object.kind === 'Secret'
      ? { data: sorted(object.data), kind: object.kind, name: object.metadata.name, type: object.type }
      : { data: sorted(object.data), kind: object.kind, name: object.metadata.name };
  const hex = createHash('sha256').update(JSON.stringify(body)).digest('hex');
  const swap: Record<string, string> = { '0': 'g', '1': 'h', '3': 'k', a: 'm', e: 't' };
  return [...hex.slice(0, 10)].map((c) => swap[c] ?? c).join('');
}

/** Reads a secrets.env as its committed secrets.env.example (the deployer's own file, if any, is never read). */
export function readExampleSecrets(file: string): string {
  return readFileSync(path.basename(file) === 'secrets.env' ? `${file}.example` : file, 'utf8');
}
