import { beforeAll, describe, expect, it } from 'vitest';
import { loadPiiParsers, PiiRedaction } from '../../src/domain/privacy/pii.ts';
import { restoreStream, type PrivacyPlan } from '../../src/domain/privacy/stage.ts';
import { SvcError } from '../../src/errors/svc-error.ts';

// Loaded with the first redacting request in the gateway (http tests cover that path); here, once up front.
beforeAll(async () => {
  await loadPiiParsers();
});

const redaction = (timeoutMs = 250, now: () => number = () => performance.now()) => new PiiRedaction({ timeoutMs, now });

describe('PII detectors', () => {
  it('replaces each kind by a typed placeholder and counts them', () => {
    const r = redaction();
    const text =
      'Mail ann.lee+x@example.co.uk or call +1 415 555 2671. Card 4111 1111 1111 1111, IBAN DE89 3704 0044 0532 0130 00, ' +
      'SSN 123-45-6789, hosts 192.168.10.20 and 2001:db8::ff00:42:8329.';
    expect(r.redact(text)).toBe('Mail [EMAIL_1] or call [PHONE_1]. Card [CARD_1], IBAN [IBAN_1], SSN [SSN_1], hosts [IP_1] and [IP_2].');
    expect(r.counts).toEqual({ email: 1, phone: 1, card: 1, iban: 1, ssn: 1, ip: 2 });
  });

  it('gives the same value the same placeholder within a request, in any spelling', () => {
    const r = redaction();
    expect(r.redact('a@x.io, b@y.io, A@X.IO')).toBe('[EMAIL_1], [EMAIL_2], [EMAIL_1]');
    expect(r.redact('(415) 555-2671 then +1 415-555-2671')).toBe('[PHONE_1] then [PHONE_1]');
    expect(r.redact('4111111111111111 / 4111-1111-1111-1111')).toBe('[CARD_1] / [CARD_1]');
    expect(r.counts).toEqual({ email: 3, phone: 2, card: 2 });
  });

  it('leaves what fails its check: a card number failing Luhn, an invalid IBAN, an impossible SSN, a non-IP', () => {
    const r = redaction();
    const text = 'order 4111 1111 1111 1112, GB00 WEST 1234 5698 7654 32, 000-12-3456, 999.1.1.1, std::vector, 12:30:45';
    expect(r.redact(text)).toBe(text);
    expect(r.total).toBe(0);
  });

  it('puts the originals back, leaving placeholders it did not make', () => {
    const r = redaction();
    const red = r.redact('write to jo@example.com from 10.0.0.1');
    expect(r.restore(`${red} [EMAIL_9]`)).toBe('write to jo@example.com from 10.0.0.1 [EMAIL_9]');
  });

  it('restores inside tool-call arguments as JSON string content', () => {
    const r = redaction();
    r.redact('mail jo@example.com, call +1 (415) 555-2671');
    expect(JSON.parse(r.restoreInJson('{"to":"[EMAIL_1]","phone":"[PHONE_1]","x":"[IP_3]"}'))).toEqual({ to: 'jo@example.com', phone: '+1 (415) 555-2671', x: '[IP_3]' });
  });

  it('restores across chunk boundaries, holding back a partial placeholder', () => {
    const r = redaction();
    r.redact('jo@example.com, SSN 123-45-6789');
    const s = r.streamRestorer();
    const out = ['Hi [EM', 'AIL_', '1] and [', 'SSN_1', ']. [not', ' one] [EMAIL_1'].map((c) => s.push(c));
    expect(out).toEqual(['Hi ', '', 'jo@example.com and ', '', '123-45-6789. [not', ' one] ']);
    expect(s.flush()).toBe('[EMAIL_1');
  });

  it('restores a whole stream of events and flushes before done', async () => {
    const r = redaction();
    r.redact('jo@example.com');
    const plan: PrivacyPlan = { redaction: r, restore: true, zero: false, retentionDays: 30, request: { model: 'm', messages: [] } };
    async function* events() {
      yield { type: 'delta' as const, content: 'to [EMA' };
      yield { type: 'delta' as const, content: 'IL_1' };
      yield { type: 'done' as const, result: { content: 'to [EMAIL_1', finishReason: 'stop' } };
    }
    const seen: unknown[] = [];
    for await (const e of restoreStream(plan, events())) seen.push(e);
    expect(seen).toEqual([
      { type: 'delta', content: 'to ' },
      { type: 'delta', content: '[EMAIL_1' },
      { type: 'done', result: { content: 'to [EMAIL_1', finishReason: 'stop', pii: { redacted: { email: 1 } } } },
    ]);
  });

  it('fails with pii_redaction_failed past its deadline (an injected clock that jumps)', () => {
    let t = 0;
    const r = redaction(250, () => (t += 100));
    try {
      r.redact('a@b.co '.repeat(10));
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(SvcError);
      expect((err as SvcError).code).toBe('pii_redaction_failed');
    }
  });

  it('measures the cost per KB of prompt (printed for the README)', () => {
    const para =
      'Dear team, please contact maria.rossi@example.it or +39 06 6982 1234 about invoice 2291. Pay to IT60 X054 2811 1010 0000 0123 456 ' +
      'with card 5555 5555 5555 4444; the server 10.1.2.3 logged it. Nothing else of note in this sentence, just words. ';
    const text = para.repeat(Math.ceil(64_000 / para.length));
    const plain = 'The quick brown fox jumps over the lazy dog and keeps running through the field. '.repeat(800);
    const perKb = (t: string) => {
      for (let i = 0; i < 3; i++) redaction(60_000).redact(t); // warm
      const runs = 10;
      const start = performance.now();
      for (let i = 0; i < runs; i++) redaction(60_000).redact(t);
      return (performance.now() - start) / runs / (Buffer.byteLength(t) / 1024);
    };
    const dense = perKb(text);
    const clean = perKb(plain);
    console.log(`PII redaction: ${dense.toFixed(3)} ms/KB on PII-dense text, ${clean.toFixed(3)} ms/KB on plain text`);
    expect(dense).toBeGreaterThan(0);
  });
});
