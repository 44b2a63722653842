/**
 * Trace ids in log lines: the logger's mixin (app-deps.ts createLogger) asks this module, which the tracing module
 * fills in when tracing is on. With tracing off it returns one shared empty object (nothing is added to the line).
 */
const NONE: Record<string, string> = Object.freeze({}) as Record<string, string>;
let source: (() => Record<string, string>) | null = null;

export function setTraceIdSource(fn: (() => Record<string, string>) | null): void {
  source = fn;
}

export function traceIdsForLog(): Record<string, string> {
  return source ? source() : NONE;
}
