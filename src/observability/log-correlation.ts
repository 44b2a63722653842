/**
 * Trace ids in log lines: the logger's mixin (app-deps.ts createLogger) asks this module, which the tracing module
 * fills in when tracing is on. With tracing off it returns an empty object (nothing is added to the line). A new object
 * each time: pino merges the line's own fields into it.
 */
let source: (() => Record<string, string>) | null = null;

export function setTraceIdSource(fn: (() => Record<string, string>) | null): void {
  source = fn;
}

export function traceIdsForLog(): Record<string, string> {
  return source ? source() : {};
}
