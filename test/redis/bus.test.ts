import { EventEmitter } from 'node:events';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { RedisBus } from '../../src/redis/bus.ts';

/** A stand-in for ioredis: the status and the publish answer are the test's. */
function fakeRedis(status: string, publish: () => Promise<number>) {
  const calls: string[] = [];
  const client = Object.assign(new EventEmitter(), {
    status,
    ping: async () => 'PONG',
    publish: (channel: string, message: string) => {
      calls.push(`${channel} ${message}`);
      return publish();
    },
    duplicate: () => Object.assign(new EventEmitter(), { subscribe: async () => 1, disconnect: () => {} }),
  });
  return { client, calls };
}

function capturedLog() {
  const lines: { msg: string; channel?: string }[] = [];
  const log = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { log, lines };
}

describe('RedisBus.publish (cross-replica cache invalidation)', () => {
  it('publishes on the prefixed channel when Redis answers', async () => {
    const { client, calls } = fakeRedis('ready', async () => 1);
    const { log, lines } = capturedLog();
    await new RedisBus(client as never, 'p:', log).publish('keys', 'key_1');
    expect(calls).toEqual(['p:keys key_1']);
    expect(lines).toEqual([]);
  });

  it('does not send, wait or throw while the connection is down; it says so in the log', async () => {
    const { client, calls } = fakeRedis('reconnecting', () => new Promise(() => {}));
    const { log, lines } = capturedLog();
    await expect(new RedisBus(client as never, 'p:', log).publish('keys', 'key_1')).resolves.toBeUndefined();
    expect(calls).toEqual([]);
    expect(lines).toMatchObject([{ channel: 'keys', msg: expect.stringContaining('could not tell the other replicas') }]);
  });

  it('a failed publish (the connection dropped) does not fail the change that was announced', async () => {
    const { client, calls } = fakeRedis('ready', async () => {
      throw new Error('Connection is closed.');
    });
    const { log, lines } = capturedLog();
    await expect(new RedisBus(client as never, 'p:', log).publish('projects', 'prj_1')).resolves.toBeUndefined();
    expect(calls).toEqual(['p:projects prj_1']);
    expect(lines).toHaveLength(1);
  });
});
