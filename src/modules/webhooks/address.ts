import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * Why a webhook may not connect to this address, or undefined when it may. Only global
 * unicast addresses pass: loopback, private (RFC 1918, IPv6 unique local), link-local (where
 * cloud metadata services answer, 169.254.169.254), carrier-grade NAT (100.64/10, Alibaba's
 * metadata), multicast, broadcast, unspecified, documentation, benchmarking and the IPv6
 * translation ranges (NAT64, 6to4, Teredo) that could lead back to any of them are refused.
 * An IPv4-mapped IPv6 address is judged as the IPv4 address it maps.
 */
export function addressProblem(address: string): string | undefined {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.parse(address);
  } catch {
    return 'not an IP address';
  }
  if (parsed instanceof ipaddr.IPv6 && parsed.isIPv4MappedAddress()) parsed = parsed.toIPv4Address();
  const range = parsed.range();
  return range === 'unicast' ? undefined : `a ${range} address`;
}

/** A connection to an address that webhooks may not reach; the attempt fails with this message. */
export class RefusedAddress extends Error {
  constructor(host: string, address: string, problem: string) {
    const what = host === address ? `${address}, ${problem}` : `${host}: it resolves to ${address}, ${problem}`;
    super(`refused to connect to ${what} (webhooks reach only public addresses unless WEBHOOK_ALLOW_PRIVATE is true)`);
    this.name = 'RefusedAddress';
  }
}

/**
 * A lookup for http(s) agents that refuses, at connect time and after resolution, a name
 * that resolves to any address webhooks may not reach (all of them are checked, so that a
 * name cannot mix a public address with an internal one). Names in URLs that are IP
 * literals never reach a lookup: checkLiteralHost covers them.
 */
export const checkedLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
    if (error) return callback(error, '', 0);
    const list = addresses;
    for (const entry of list) {
      const problem = addressProblem(entry.address);
      if (problem) return callback(new RefusedAddress(hostname, entry.address, problem), '', 0);
    }
    if (list.length === 0) {
      const none = Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' });
      return callback(none, '', 0);
    }
    if (options.all) return (callback as (e: null, a: LookupAddress[]) => void)(null, list);
    callback(null, list[0]!.address, list[0]!.family);
  });
};

/** The URL's host when it is an IP literal (which no lookup sees): refused unless public. */
export function checkLiteralHost(hostname: string): void {
  const bare = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
  if (isIP(bare) === 0) return;
  const problem = addressProblem(bare);
  if (problem) throw new RefusedAddress(bare, bare, problem);
}
