/**
 * Preloaded into an api process by bench/sequential.ts (`--require`): where a lone request's time goes, seen from
 * inside the api. Node's diagnostics channels mark each POST /v1/inference's arrival (its headers parsed), the
 * provider call's start and its answer's headers (undici), and the response's end; PerformanceObserver marks the
 * api's GC pauses. A first SIGUSR2 starts watching, the next one writes what was seen as JSON to BENCH_TIMING_FILE
 * and stops: outside a watched window no channel has a subscriber, so the api runs as without it. CommonJS, so that
 * `--require` loads it on every Node the bench runs.
 */
'use strict';
const dc = require('node:diagnostics_channel');
const { writeFileSync } = require('node:fs');
const { performance, PerformanceObserver } = require('node:perf_hooks');

const SLOW_MS = 3;
let requests = [];
let current = null;
let gcs = [];
const marks = new WeakMap();

const handlers = {
  'http.server.request.start': ({ request }) => {
    if (request.method !== 'POST' || !request.url.startsWith('/v1/inference')) return;
    current = { start: performance.now(), providerStart: 0, providerHeaders: 0, end: 0 };
    marks.set(request, current);
  },
  'undici:request:create': () => {
    if (current && current.providerStart === 0) current.providerStart = performance.now();
  },
  'undici:request:headers': () => {
    if (current && current.providerHeaders === 0) current.providerHeaders = performance.now();
  },
  'http.server.response.finish': ({ request }) => {
    const r = marks.get(request);
    if (!r) return;
    r.end = performance.now();
    requests.push(r);
  },
};
const observer = new PerformanceObserver((list) => {
  for (const e of list.getEntries()) gcs.push([e.startTime, e.duration]);
});
let watching = false;

const quantile = (sorted, q) => (sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))]);
const round = (x) => Math.round(x * 100) / 100;

process.on('SIGUSR2', () => {
  watching = !watching;
  for (const [name, fn] of Object.entries(handlers)) (watching ? dc.subscribe : dc.unsubscribe)(name, fn);
  if (watching) {
    requests = [];
    gcs = [];
    current = null;
    observer.observe({ entryTypes: ['gc'] });
    return;
  }
  observer.disconnect();
  const done = requests.filter((r) => r.providerStart > 0 && r.providerHeaders > 0);
  const totals = done.map((r) => r.end - r.start).sort((a, b) => a - b);
  const span = done.length > 1 ? done[done.length - 1].end - done[0].start : 0;
  const slow = done.filter((r) => r.end - r.start > SLOW_MS);
  const sum = (f) => slow.reduce((s, r) => s + f(r), 0);
  const gcIn = (r) => gcs.filter(([s, d]) => s + d >= r.start && s <= r.end).reduce((t, [s, d]) => t + Math.min(s + d, r.end) - Math.max(s, r.start), 0);
  const out = {
    requests: done.length,
    p50_ms: round(quantile(totals, 0.5)),
    p99_ms: round(quantile(totals, 0.99)),
    mean_ms: round(totals.reduce((a, b) => a + b, 0) / Math.max(1, totals.length)),
    slow_ms: SLOW_MS,
    slow: {
      requests: slow.length,
      share_of_time: span > 0 ? round((sum((r) => r.end - r.start) / span) * 100) / 100 : 0,
      // Of the slow requests' time: before the provider call (the api's work and the Redis script call it waits
      // for), waiting for the provider, after its answer (the api's work and the response's write), and the part of
      // it the api spent in GC pauses (any of the three).
      before_provider_ms: round(sum((r) => r.providerStart - r.start)),
      provider_ms: round(sum((r) => r.providerHeaders - r.providerStart)),
      after_provider_ms: round(sum((r) => r.end - r.providerHeaders)),
      gc_ms: round(sum(gcIn)),
    },
  };
  writeFileSync(process.env.BENCH_TIMING_FILE || `request-timing-${process.pid}.json`, JSON.stringify(out));
});
