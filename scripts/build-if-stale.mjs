// `npm start`'s prestart: compiles the server only when a source changed since the last build (CONTRACT §23: the
// start command recompiles nothing when the sources did not change). Compares the newest modification time under
// src/ (the console aside: it is built by `npm run build:admin`) and of the build's configuration with a stamp the
// last successful build wrote; a missing stamp or dist/server/main.js builds. Plain JavaScript: it runs before tsx
// or anything compiled exists.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const stamp = path.join(root, 'dist/server/.build-stamp');
const inputs = ['tsconfig.json', 'tsconfig.build.json', 'package-lock.json'].map((f) => path.join(root, f));

function newest(dir, skip) {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (full !== skip) latest = Math.max(latest, newest(full, skip));
    } else latest = Math.max(latest, statSync(full).mtimeMs);
  }
  return latest;
}

const sources = Math.max(newest(path.join(root, 'src'), path.join(root, 'src/admin')), ...inputs.filter(existsSync).map((f) => statSync(f).mtimeMs));
const built = existsSync(stamp) && existsSync(path.join(root, 'dist/server/main.js')) ? statSync(stamp).mtimeMs : 0;
// --always (npm run build:server, postinstall): build whatever the stamp says.
if (built >= sources && !process.argv.includes('--always')) process.exit(0);

const started = Date.now();
const result = spawnSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
if (result.status !== 0) process.exit(result.status ?? 1);
// The stamp's time is the build's start: a source saved during the build is newer, so the next start builds again.
writeFileSync(stamp, `built from sources as of ${new Date(started).toISOString()}\n`);
utimesSync(stamp, started / 1000, started / 1000);
