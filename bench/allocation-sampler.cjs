/**
 * Preloaded into the api by bench/allocation.ts (`--require`): on the first SIGUSR2, V8's sampling heap profiler starts
 * (every 1 KiB allocated on average, the objects the collectors freed kept in the profile); on the second it stops
 * and writes the profile to BENCH_ALLOCATION_FILE. Nothing runs until then.
 */
'use strict';
const inspector = require('node:inspector');
const { writeFileSync } = require('node:fs');

const session = new inspector.Session();
session.connect();
let sampling = false;
process.on('SIGUSR2', () => {
  if (!sampling) {
    sampling = true;
    session.post('HeapProfiler.enable', () =>
      session.post('HeapProfiler.startSampling', { samplingInterval: 1024, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true }),
    );
    return;
  }
  session.post('HeapProfiler.stopSampling', (err, result) => {
    writeFileSync(process.env.BENCH_ALLOCATION_FILE, JSON.stringify(err ? { error: String(err) } : result.profile));
    sampling = false;
  });
});
