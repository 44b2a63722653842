import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import type { LookupAddress } from 'node:dns';
import { tmpdir } from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import Stripe from 'stripe';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { EgressPolicy, parseAllowlist } from '../../src/kernel/egress.ts';
import { nextAttemptAt } from '../../src/domain/webhooks/retry-schedule.ts';
import { AesGcmSecretBox, KEY_FILE_NAME, createSecretBox } from '../../src/kernel/secret-box.ts';
import { generateSigningSecret, signatureHeader } from '../../src/domain/webhooks/signing.ts';

const stripe = new Stripe('sk_test_x');

describe('signatureHeader', () => {
  it("is accepted by Stripe's verifier for any body and secret, and rejected for any other secret", () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', minLength: 1 }), fc.string({ minLength: 1 }).filter((s) => !/\s/.test(s)), (body, other) => {
        const secret = generateSigningSecret();
        const t = Math.floor(Date.now() / 1000);
        const header = signatureHeader(secret, body, t);
        expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
        // constructEvent parses JSON: verify the signature itself for arbitrary bodies.
        expect(stripe.webhooks.signature!.verifyHeader(body, header, secret)).toBe(true);
        expect(() => stripe.webhooks.signature!.verifyHeader(body, header, `whsec_${other}`)).toThrow();
      }),
      { numRuns: 200 },
    );
  });

  it('matches an independently computed Stripe test header', () => {
    const secret = 'whsec_test_secret';
    const body = '{"id":"evt_1"}';
    const expected = stripe.webhooks.generateTestHeaderString({ payload: body, secret, timestamp: 1_700_000_000 });
    expect(signatureHeader(secret, body, 1_700_000_000)).toBe(expected);
  });

  it('makes secrets whsec_ + 256 random bits', () => {
    const secrets = new Set(Array.from({ length: 100 }, generateSigningSecret));
    expect(secrets.size).toBe(100);
    for (const s of secrets) expect(s).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
  });
});

describe('secret box (AES-256-GCM)', () => {
  it('round-trips, binds the ciphertext to its row, and detects tampering', () => {
    const box = new AesGcmSecretBox(randomBytes(32));
    const sealed = box.seal('whsec_abc', 'wh_1');
    expect(sealed).not.toContain('whsec_abc');
    expect(box.seal('whsec_abc', 'wh_1')).not.toBe(sealed); // fresh IV each time
    expect(box.open(sealed, 'wh_1')).toBe('whsec_abc');
    expect(() => box.open(sealed, 'wh_2')).toThrow();
    const [iv, tag, ct] = sealed.split('.');
    const flipped = Buffer.from(ct!, 'base64url');
    flipped[0]! ^= 1;
    expect(() => box.open([iv, tag, flipped.toString('base64url')].join('.'), 'wh_1')).toThrow();
    expect(() => new AesGcmSecretBox(randomBytes(32)).open(sealed, 'wh_1')).toThrow();
  });

  it('uses SVC_ENCRYPTION_KEY when set and writes no key file', () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'svc-box-'));
    const key = randomBytes(32);
    const box = createSecretBox({ encryptionKey: key.toString('hex'), dataDir });
    const sealed = box.seal('whsec_x', 'wh_1');
    expect(new AesGcmSecretBox(key).open(sealed, 'wh_1')).toBe('whsec_x');
    expect(() => statSync(path.join(dataDir, KEY_FILE_NAME))).toThrow();
  });

  it('otherwise generates one key in the data directory on first use, mode 0600, and reuses it', () => {
    const dataDir = path.join(mkdtempSync(path.join(tmpdir(), 'svc-box-')), 'data');
    const generated: string[] = [];
    const first = createSecretBox({ encryptionKey: null, dataDir, onGenerated: (f) => generated.push(f) });
    expect(() => statSync(path.join(dataDir, KEY_FILE_NAME))).toThrow(); // lazy: nothing until used
    const sealed = first.seal('whsec_y', 'wh_1');
    const file = path.join(dataDir, KEY_FILE_NAME);
    expect(generated).toEqual([file]);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, 'utf8').trim()).toMatch(/^[0-9a-f]{64}$/);
    const second = createSecretBox({ encryptionKey: null, dataDir, onGenerated: (f) => generated.push(f) });
    expect(second.open(sealed, 'wh_1')).toBe('whsec_y');
    expect(generated).toHaveLength(1);
  });
});

describe('egress policy', () => {
  const none = new EgressPolicy([]);

  it.each([
    '10.1.2.3', '172.31.255.255', '192.168.0.1', '127.0.0.1', '0.0.0.0', '169.254.1.1', '169.254.169.254', '100.64.0.1',
    '224.0.0.251', '255.255.255.255', '192.0.2.1', '198.18.0.1', '240.0.0.1', '::', '::1', 'fe80::1', 'fc00::1',
    'fd00:ec2::254', 'ff02::1', '::ffff:10.0.0.1', '::ffff:127.0.0.1', '::ffff:169.254.169.254', '64:ff9b::a00:1',
    '2002:a00:1::1', '2001:db8::1', '168.63.129.16',
  ])('refuses %s', (ip) => {
    expect(none.refusal(ip)).not.toBeNull();
  });

  it.each(['93.184.216.34', '8.8.8.8', '2606:4700:4700::1111', '::ffff:93.184.216.34'])('allows the public address %s', (ip) => {
    expect(none.refusal(ip)).toBeNull();
  });

  it('lets the allowlist open IPs, CIDRs and hostnames, but opens metadata addresses only when named exactly', () => {
    const policy = new EgressPolicy(['127.0.0.1', '10.0.0.0/8', 'fd12::/16', 'hooks.corp', '*.internal.corp', '0.0.0.0/0']);
    expect(policy.refusal('127.0.0.1')).toBeNull();
    expect(policy.refusal('::ffff:127.0.0.1')).toBeNull();
    expect(policy.refusal('10.9.8.7')).toBeNull();
    expect(policy.refusal('fd12:1::5')).toBeNull();
    expect(new EgressPolicy(['127.0.0.1']).refusal('127.0.0.2')).not.toBeNull();
    expect(new EgressPolicy(['hooks.corp']).refusal('10.0.0.1', 'hooks.corp')).toBeNull();
    expect(new EgressPolicy(['hooks.corp']).refusal('10.0.0.1', 'other.corp')).not.toBeNull();
    expect(new EgressPolicy(['*.internal.corp']).refusal('10.0.0.1', 'a.internal.corp')).toBeNull();
    // 0.0.0.0/0 and 169.254.0.0/16 are broad; the metadata service needs its own entry.
    expect(policy.refusal('169.254.169.254')).not.toBeNull();
    expect(new EgressPolicy(['169.254.0.0/16']).refusal('169.254.169.254')).not.toBeNull();
    expect(new EgressPolicy(['169.254.169.254']).refusal('169.254.169.254')).toBeNull();
  });

  it('refuses bad allowlist entries, and the config names the variable', () => {
    for (const bad of ['10.0.0.0/33', 'http://x', 'a b', '1.2.3.4/x', '*.']) expect(() => parseAllowlist([bad])).toThrow();
    expect(() => loadConfig({ SVC_EGRESS_ALLOWLIST: '127.0.0.1, 10.0.0.0/40' })).toThrow(/^SVC_EGRESS_ALLOWLIST: /);
    expect(loadConfig({ SVC_EGRESS_ALLOWLIST: '127.0.0.1, 10.0.0.0/8,hooks.corp' }).egressAllowlist).toEqual([
      '127.0.0.1',
      '10.0.0.0/8',
      'hooks.corp',
    ]);
    expect(() => loadConfig({ SVC_WEBHOOK_TIMEOUT_MS: '50' })).toThrow(/^SVC_WEBHOOK_TIMEOUT_MS: /);
    expect(loadConfig({}).webhookTimeoutMs).toBe(10_000);
  });

  it('hands the connect step only vetted addresses, and refuses a host that now resolves somewhere private', async () => {
    let answer: string[] = ['93.184.216.34'];
    const policy = new EgressPolicy([], async (): Promise<LookupAddress[]> => answer.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })));
    const lookup = (all: boolean) =>
      new Promise<unknown>((resolve, reject) =>
        policy.lookup('hooks.example.com', { all }, (err: Error | null, address: unknown) => (err ? reject(err) : resolve(address))),
      );
    expect(await lookup(false)).toBe('93.184.216.34');
    expect(await lookup(true)).toEqual([{ address: '93.184.216.34', family: 4 }]);
    answer = ['93.184.216.34', '10.0.0.1']; // DNS rebinding: the second answer points inside
    await expect(lookup(true)).rejects.toThrow(/egress|private/i);
    answer = ['169.254.169.254'];
    await expect(lookup(false)).rejects.toThrow(/metadata/);
  });

  it('keeps only the allowlisted addresses of a host that resolves to non-public addresses only', async () => {
    let answer = ['::1', '127.0.0.1'];
    const policy = new EgressPolicy(['127.0.0.1'], async (): Promise<LookupAddress[]> => answer.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })));
    const all = await new Promise<unknown>((resolve, reject) =>
      policy.lookup('localhost', { all: true }, (err: Error | null, a: unknown) => (err ? reject(err) : resolve(a))),
    );
    expect(all).toEqual([{ address: '127.0.0.1', family: 4 }]);
    answer = ['::1'];
    await expect(policy.resolveVetted('localhost')).rejects.toThrow(/loopback/);
    await expect(policy.vetUrl('https://localhost/x')).rejects.toThrow(/SVC_EGRESS_ALLOWLIST/);
  });
});

describe('retry schedule', () => {
  const schedule = [0, 30, 120, 600, 3600, 21600];
  const first = new Date('2030-01-01T00:00:00Z');
  const at = (s: number) => new Date(first.getTime() + s * 1000);

  it('measures each attempt from the first and stops after the last', () => {
    const due = [1, 2, 3, 4, 5].map((made) => nextAttemptAt(first, made, schedule, 86_400, at(schedule[made - 1]!)));
    expect(due).toEqual([at(30), at(120), at(600), at(3600), at(21600)]);
    expect(nextAttemptAt(first, 6, schedule, 86_400, at(21600))).toBeNull();
  });

  it('keeps the scheduled gap after a late attempt, and never goes past the horizon', () => {
    // Attempt 3 ran an hour late: attempt 4 comes its 8-minute gap later, not at once.
    expect(nextAttemptAt(first, 3, schedule, 86_400, at(3720))).toEqual(at(3720 + 480));
    expect(nextAttemptAt(first, 5, schedule, 86_400, at(70_000))).toBeNull(); // 70 000 + 18 000 > 86 400
    expect(nextAttemptAt(first, 1, [0, 30], 30)).toBeNull();
    expect(nextAttemptAt(first, 1, [0, 30], 31)).toEqual(at(30));
  });
});

describe('SVC_MAX_WEBHOOKS_PER_PROJECT', () => {
  it('defaults to 16 and stops the start with a line naming the variable when it is not a whole number from 1 to 1000', () => {
    expect(loadConfig({}).maxWebhooksPerProject).toBe(16);
    expect(loadConfig({ SVC_MAX_WEBHOOKS_PER_PROJECT: '100' }).maxWebhooksPerProject).toBe(100);
    for (const bad of ['0', '-1', '1001', 'sixteen', '2.5']) {
      expect(() => loadConfig({ SVC_MAX_WEBHOOKS_PER_PROJECT: bad })).toThrow(/^SVC_MAX_WEBHOOKS_PER_PROJECT: must be/);
    }
  });
});

describe('loopback names at delivery', () => {
  it('are refused whatever DNS answers, for a webhook stored before creation refused them', async () => {
    const policy = new EgressPolicy([], async (): Promise<LookupAddress[]> => [{ address: '93.184.216.34', family: 4 }]);
    for (const name of ['localhost', 'hooks.localhost', 'localhost.', 'ip6-loopback']) {
      await expect(policy.resolveVetted(name)).rejects.toThrow(/loopback name/);
    }
    expect(await policy.resolveVetted('hooks.example.com')).toEqual([{ address: '93.184.216.34', family: 4 }]);
  });
});
