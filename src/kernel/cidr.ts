import ipaddr from 'ipaddr.js';

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** The IPv4 form of an IPv4-mapped IPv6 address (`::ffff:10.0.0.1`), so that a rule for 10.0.0.0/8 matches it. */
function parseAddress(address: string): ipaddr.IPv4 | ipaddr.IPv6 {
  return ipaddr.process(address.replace(/^\[|\]$/g, '').replace(/%.*$/, ''));
}

/** Whether `entry` is an IP address or a CIDR (`10.0.0.0/8`, `2001:db8::/32`, `192.0.2.7`). */
export function isCidr(entry: string): boolean {
  const e = entry.trim();
  if (ipaddr.isValid(e) && !e.includes('/')) return true;
  return ipaddr.isValidCIDR(e) && /\/\d{1,3}$/.test(e);
}

/** An IP allowlist of CIDRs (a bare address is its own /32 or /128). Throws on an entry that is neither. */
export class CidrList {
  private readonly ranges: Range[];

  constructor(readonly entries: readonly string[]) {
    this.ranges = entries.map((raw) => {
      const entry = raw.trim();
      if (!isCidr(entry)) throw new Error(`"${raw}" is not an IP address or CIDR`);
      if (!entry.includes('/')) {
        const ip = parseAddress(entry);
        return [ip, ip.kind() === 'ipv4' ? 32 : 128];
      }
      const [ip, bits] = ipaddr.parseCIDR(entry);
      // An IPv4-mapped rule (::ffff:10.0.0.0/104) is the IPv4 rule it spells, as addresses are unmapped before matching.
      if (ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
        return [(ip as ipaddr.IPv6).toIPv4Address(), bits - 96];
      }
      return [ip, bits];
    });
  }

  get empty(): boolean {
    return this.ranges.length === 0;
  }

  /** An empty list allows every address; an unreadable address is refused. */
  allows(address: string | null | undefined): boolean {
    if (this.ranges.length === 0) return true;
    if (!address) return false;
    let ip: ipaddr.IPv4 | ipaddr.IPv6;
    try {
      ip = parseAddress(address);
    } catch {
      return false;
    }
    return this.ranges.some(([range, bits]) => range.kind() === ip.kind() && ip.match(range as never, bits));
  }
}
