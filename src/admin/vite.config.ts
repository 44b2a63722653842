import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const here = path.dirname(fileURLToPath(import.meta.url));

/** The admin console: a static single page, built to dist/admin and served by the gateway at /admin. */
export default defineConfig({
  root: here,
  base: '/admin/',
  logLevel: 'warn',
  build: {
    outDir: path.resolve(here, '../../dist/admin'),
    emptyOutDir: true,
    sourcemap: false,
    target: 'es2022',
  },
});
