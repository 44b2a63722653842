import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The folder holding package.json: found by walking up from this module, so the same code finds prisma/ and dist/admin
 * whether it runs from src/ (tsx, tests) or compiled from dist/server/.
 */
function findRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('package.json not found above the gateway sources');
    dir = parent;
  }
  return dir;
}

export const PROJECT_ROOT = findRoot();
