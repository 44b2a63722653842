import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { PROJECT_ROOT } from '../../src/project-root.ts';

/** compose.yaml as Compose reads it (YAML merge keys resolved), and the shell interpolation it applies. */
export interface ComposeService {
  image?: string;
  build?: string | { context: string };
  profiles?: string[];
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition: string }>;
  command?: string[];
  entrypoint?: string[];
  volumes?: string[];
  ports?: string[];
  healthcheck?: { test: string[] };
  restart?: string;
}

export function readCompose(): { services: Record<string, ComposeService> } {
  return parseYaml(readFileSync(path.join(PROJECT_ROOT, 'compose.yaml'), 'utf8'), { merge: true }) as { services: Record<string, ComposeService> };
}

/** Compose's interpolation: ${VAR}, ${VAR:-default}, ${VAR:?message} (unset or empty fails), $$ for a dollar. */
export function interpolate(value: string, shell: Record<string, string>): string {
  return value.replace(/\$\$|\$\{([A-Z0-9_]+)(?:(:-|:\?)([^}]*))?\}/g, (whole, name: string | undefined, op: string | undefined, arg: string | undefined) => {
    if (whole === '$$') return '$';
    const v = shell[name!];
    if (v !== undefined && v !== '') return v;
    if (op === ':?') throw new Error(`${name}: ${arg}`);
    return op === ':-' ? arg! : '';
  });
}

/** A service's bind-mounted file from the repository: `./x:/in/container[:ro]` for `/in/container`. */
export function mountedFile(service: ComposeService, inContainer: string): string {
  const mount = (service.volumes ?? []).map((v) => v.split(':')).find(([, target]) => target === inContainer);
  if (!mount) throw new Error(`no mount at ${inContainer}`);
  return path.join(PROJECT_ROOT, mount[0]!);
}
