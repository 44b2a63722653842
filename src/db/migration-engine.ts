/**
 * The migration engine: Prisma's schema engine compiled to WebAssembly (`@prisma/schema-engine-wasm`), loaded once
 * per process and run over a connection of migration-connections.ts. Used by migrations.ts.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { bindMigrationAwareSqlAdapterFactory, type ErrorRegistry } from '@prisma/driver-adapter-utils';
import type { SchemaEngine } from '@prisma/schema-engine-wasm';
import type { EngineConnection } from './migration-connections.ts';

type EngineClass = typeof SchemaEngine;
let engineClass: Promise<EngineClass> | undefined;

/**
 * Instantiates the engine once per process (wasm-bindgen keeps one instance in module state). The package's own entry
 * imports the .wasm file as an ES module, which Node 20 cannot do, so we instantiate it ourselves.
 */
function loadEngineClass(): Promise<EngineClass> {
  engineClass ??= (async () => {
    const runtime = await import('@prisma/schema-engine-wasm/schema_engine_bg');
    const entry = createRequire(import.meta.url).resolve('@prisma/schema-engine-wasm');
    const bytes = readFileSync(path.join(path.dirname(entry), 'schema_engine_bg.wasm'));
    const instance = new WebAssembly.Instance(new WebAssembly.Module(bytes), {
      './schema_engine_bg.js': withUnrefTimers(runtime) as WebAssembly.ModuleImports,
    });
    runtime.__wbg_set_wasm(instance.exports);
    (instance.exports.__wbindgen_start as () => void)();
    return runtime.SchemaEngine;
  })();
  return engineClass;
}

/**
 * The engine arms a 10 s timer around its advisory-lock query and never clears it, which would keep a finished CLI
 * (or a test worker) alive: its timers must not hold the event loop open.
 */
function withUnrefTimers(runtime: Record<string, unknown>): Record<string, unknown> {
  const imports: Record<string, unknown> = { ...runtime };
  for (const [name, fn] of Object.entries(runtime)) {
    if (!name.startsWith('__wbg_setTimeout_') || typeof fn !== 'function') continue;
    imports[name] = (...args: unknown[]) => {
      const timer = fn(...args);
      (timer as { unref?: () => void })?.unref?.();
      return timer;
    };
  }
  return imports;
}

/** Runs fn on a fresh engine over the connection, then frees the engine and closes the connection. */
export async function withEngine<T>(connection: EngineConnection, fn: (engine: SchemaEngine) => Promise<T>): Promise<T> {
  const bound = bindMigrationAwareSqlAdapterFactory(connection.factory);
  let engine: SchemaEngine | undefined;
  try {
    const Engine = await loadEngineClass();
    engine = await Engine.new({ datamodels: undefined }, () => {}, bound);
    return await fn(engine);
  } catch (err) {
    throw engineError(err, bound.errorRegistry);
  } finally {
    engine?.free();
    await connection.close();
  }
}

/** The engine reports driver failures as "External error id#N": put the driver's own message in their place. */
function engineError(err: unknown, registry: ErrorRegistry): Error {
  if (!(err instanceof Error)) return new Error(String(err));
  const code = (err as { code?: string }).code;
  const message = err.message.replace(/External error id#(\d+)/g, (text, id) => {
    const record = registry.consumeError(Number(id));
    return record ? describeDriverError(record.error) : text;
  });
  return new Error(code && !message.includes(code) ? `${code}: ${message}` : message, { cause: err });
}

function describeDriverError(error: unknown): string {
  const cause = (error as { cause?: { message?: string; kind?: string } })?.cause;
  if (cause?.message) return cause.message;
  if (error instanceof Error) return error.message;
  return cause?.kind ?? String(error);
}
