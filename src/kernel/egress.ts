import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';

/** Why a webhook url may not be reached; the message never names the addresses it resolved to. */
export class EgressRefused extends Error {
  readonly code = 'EGRESS_REFUSED';
  constructor(message: string) {
    super(message);
    this.name = 'EgressRefused';
  }
}

export type Resolver = (hostname: string) => Promise<LookupAddress[]>;

export const systemResolver: Resolver = (hostname) =>
  new Promise((resolve, reject) =>
    dnsLookup(hostname, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))),
  );

/**
 * Cloud metadata services. Most sit in ranges refused anyway (link-local, unique-local, CGNAT); Azure's wire server is
 * a public address. Even a broad allowlisted range does not open them: only an entry naming the exact address does.
 */
const METADATA_ADDRESSES = new Set(
  [
    '169.254.169.254', // AWS, GCP, Azure, Oracle, DigitalOcean, OpenStack
    '169.254.170.2', // AWS ECS task metadata
    '169.254.170.23', // AWS EKS pod identity
    'fd00:ec2::254', // AWS IPv6
    'fd00:ec2::23', // AWS EKS pod identity IPv6
    '100.100.100.200', // Alibaba Cloud
    '168.63.129.16', // Azure wire server
    '192.0.0.192', // Oracle Cloud
  ].map((a) => ipaddr.parse(a).toNormalizedString()),
);

type Rule =
  | { kind: 'host'; host: string }
  | { kind: 'suffix'; suffix: string }
  | { kind: 'range'; range: [ipaddr.IPv4 | ipaddr.IPv6, number]; exact: string | null };

/**
 * Names that mean this machine whatever DNS says: RFC 6761 §6.3 (`localhost` and every name under `.localhost`), and
 * the loopback names of common /etc/hosts files. Lower case, without the trailing dot.
 */
const LOOPBACK_NAMES = new Set(['localhost', 'localhost.localdomain', 'ip6-localhost', 'ip6-loopback']);
export function isLoopbackName(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.+$/, '');
  return LOOPBACK_NAMES.has(host) || host.endsWith('.localhost');
}

/**
 * The one answer for a host name that does not resolve, resolves to a refused address, or does not answer in time: a
 * caller must not learn which (that would map internal DNS names). Delivery checks the addresses again at connect.
 */
export const UNREACHABLE_HOST =
  'url host must resolve to a public address: it does not resolve, or resolves to a private, loopback, link-local or otherwise non-public address (allow such a destination with SVC_EGRESS_ALLOWLIST).';

const LOOPBACK_NAME = 'url host is a loopback name (localhost, *.localhost: RFC 6761); allow it with SVC_EGRESS_ALLOWLIST.';

const HOSTNAME = /^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$/i;

/** SVC_EGRESS_ALLOWLIST entries: a hostname (`hooks.corp`), a suffix (`*.corp`), an IP or a CIDR. Throws on a bad one. */
export function parseAllowlist(entries: readonly string[]): Rule[] {
  return entries.map((raw) => {
    const entry = raw.trim().toLowerCase();
    if (isIP(entry)) {
      const ip = ipaddr.process(entry);
      return { kind: 'range', range: [ip, ip.kind() === 'ipv4' ? 32 : 128], exact: ip.toNormalizedString() };
    }
    if (entry.includes('/')) {
      const [addr, bits] = entry.split('/');
      if (!isIP(addr!) || !/^\d{1,3}$/.test(bits!) || !ipaddr.isValidCIDR(entry)) {
        throw new Error(`"${raw}" is not a valid CIDR`);
      }
      const [ip, prefix] = ipaddr.parseCIDR(entry);
      const single = prefix === (ip.kind() === 'ipv4' ? 32 : 128);
      return { kind: 'range', range: [ip, prefix], exact: single ? ip.toNormalizedString() : null };
    }
    if (entry.startsWith('*.') && HOSTNAME.test(entry.slice(2))) return { kind: 'suffix', suffix: entry.slice(1) };
    if (HOSTNAME.test(entry)) return { kind: 'host', host: entry.replace(/\.$/, '') };
    throw new Error(`"${raw}" is not a hostname, IP address or CIDR`);
  });
}

/** The IPv4 form of an IPv4-mapped IPv6 address (`::ffff:10.0.0.1`), so that it is judged as what it reaches. */
function normalize(address: string): ipaddr.IPv4 | ipaddr.IPv6 {
  return ipaddr.process(address.replace(/^\[|\]$/g, '').replace(/%.*$/, ''));
}

/**
 * The SSRF guard for webhooks (CONTRACT §6, spec 6.1.6): HTTPS only, and no private, loopback, link-local, multicast,
 * unspecified, reserved or cloud-metadata destination unless SVC_EGRESS_ALLOWLIST allows it. `lookup` plugs into the
 * HTTP client's connect step so that the address connected to is the address that was checked (no DNS-rebinding window).
 */
export class EgressPolicy {
  private readonly rules: Rule[];

  constructor(
    allowlist: readonly string[] = [],
    private readonly resolver: Resolver = systemResolver,
  ) {
    this.rules = parseAllowlist(allowlist);
  }

  private hostAllowed(hostname: string | null): boolean {
    if (!hostname) return false;
    const host = hostname.toLowerCase().replace(/\.$/, '');
    return this.rules.some((r) => (r.kind === 'host' ? r.host === host : r.kind === 'suffix' ? host.endsWith(r.suffix) : false));
  }

  /**
   * A loopback name may be used when the allowlist names it (`localhost`, `*.localhost`) or allows a loopback address
   * (`127.0.0.1`, `::1`): it can only reach this machine, and only its allowlisted addresses are ever connected to.
   */
  private loopbackNameAllowed(hostname: string): boolean {
    if (this.hostAllowed(hostname)) return true;
    return ['127.0.0.1', '::1'].some((a) => {
      const ip = ipaddr.parse(a);
      return this.rules.some((r) => r.kind === 'range' && r.range[0].kind() === ip.kind() && ip.match(r.range));
    });
  }

  /** Null when the address may be reached (for `hostname`, if it was resolved from one), else why not. */
  refusal(address: string, hostname: string | null = null): string | null {
    let ip: ipaddr.IPv4 | ipaddr.IPv6;
    try {
      ip = normalize(address);
    } catch {
      return 'is not a valid address';
    }
    const normalized = ip.toNormalizedString();
    const inRange = (r: Rule) => r.kind === 'range' && r.range[0].kind() === ip.kind() && ip.match(r.range);
    if (METADATA_ADDRESSES.has(normalized)) {
      return this.rules.some((r) => r.kind === 'range' && r.exact === normalized) ? null : 'is a cloud metadata address';
    }
    // ::a.b.c.d (IPv4-compatible, deprecated) reaches IPv4 a.b.c.d on some stacks; ipaddr.js calls it unicast.
    const ipv4Compatible = ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).parts.slice(0, 6).every((p) => p === 0);
    if (ip.range() === 'unicast' && !ipv4Compatible) return null;
    if (this.hostAllowed(hostname) || this.rules.some(inRange)) return null;
    return 'is a private, loopback, link-local or otherwise non-public address';
  }

  /**
   * Checks a webhook url when it is created: HTTPS, no credentials, not a loopback name, and a host that is, or resolves
   * to, an allowed address. A name that does not resolve (or not within 3 s) is refused with the same message as one
   * that resolves to a refused address (UNREACHABLE_HOST), so that creation tells nothing about internal DNS. The
   * addresses are checked again at every delivery (lookup below).
   */
  async vetUrl(raw: string): Promise<URL> {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new EgressRefused('url must be a valid absolute URL.');
    }
    if (url.protocol !== 'https:') throw new EgressRefused('url must use https.');
    if (url.username || url.password) throw new EgressRefused('url must not contain credentials.');
    const host = url.hostname;
    if (!host) throw new EgressRefused('url must name a host.');
    if (isIP(host.replace(/^\[|\]$/g, ''))) {
      const why = this.refusal(host);
      if (why) throw new EgressRefused(`url host ${why}; allow it with SVC_EGRESS_ALLOWLIST.`);
      return url;
    }
    if (isLoopbackName(host) && !this.loopbackNameAllowed(host)) throw new EgressRefused(LOOPBACK_NAME);
    try {
      const addresses = await withTimeout(this.resolver(host), 3_000);
      if (addresses.length === 0) throw new Error('no address');
      this.vet(host, addresses);
    } catch {
      throw new EgressRefused(UNREACHABLE_HOST);
    }
    return url;
  }

  /** A delivery-time check for hosts given as IP literals (the connect step does no lookup for those). */
  assertLiteralAllowed(url: URL): void {
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (!isIP(host)) return;
    const why = this.refusal(host);
    if (why) throw new EgressRefused(`url host ${why}.`);
  }

  /**
   * The addresses of a host that may be connected to. A host with a refused address is refused when it also has a public
   * one (a public + private answer is DNS-rebinding bait) or has no allowed one. A host whose addresses are all
   * non-public and partly allowlisted (`localhost` → 127.0.0.1 and ::1, with 127.0.0.1 allowlisted) keeps the allowed
   * ones: only those are ever connected to.
   */
  private vet(host: string, addresses: LookupAddress[]): LookupAddress[] {
    const allowed: LookupAddress[] = [];
    let why: string | null = null;
    for (const a of addresses) {
      const refused = this.refusal(a.address, host);
      if (refused) why ??= refused;
      else allowed.push(a);
    }
    if (why === null) return addresses;
    if (allowed.length === 0 || allowed.some((a) => normalize(a.address).range() === 'unicast')) {
      throw new EgressRefused(`url host resolves to an address that ${why}; allow it with SVC_EGRESS_ALLOWLIST.`);
    }
    return allowed;
  }

  async resolveVetted(hostname: string): Promise<LookupAddress[]> {
    // A webhook stored before loopback names were refused at creation is refused here, whatever DNS answers.
    if (isLoopbackName(hostname) && !this.loopbackNameAllowed(hostname)) throw new EgressRefused(LOOPBACK_NAME);
    const addresses = await this.resolver(hostname);
    if (addresses.length === 0) throw Object.assign(new Error(`${hostname} does not resolve`), { code: 'ENOTFOUND' });
    return this.vet(hostname, addresses);
  }

  /** For net/tls `connect({ lookup })`: resolves, vets and hands back only vetted addresses. */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    const family = typeof options === 'object' && options ? options.family : undefined;
    const all = typeof options === 'object' && options ? Boolean(options.all) : false;
    this.resolveVetted(hostname).then(
      (addresses) => {
        const wanted = family === 4 || family === 6 ? addresses.filter((a) => a.family === family) : addresses;
        if (wanted.length === 0) {
          callback(Object.assign(new Error(`${hostname} has no IPv${family} address`), { code: 'ENOTFOUND' }), '', 0);
        } else if (all) {
          (callback as unknown as (err: null, addresses: LookupAddress[]) => void)(null, wanted);
        } else {
          callback(null, wanted[0]!.address, wanted[0]!.family);
        }
      },
      (err: NodeJS.ErrnoException) => callback(err, '', 0),
    );
  };
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timeout')), ms);
    timer.unref();
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}
