/** The value of one sample line of a Prometheus text body, or undefined. */
export function sample(body: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of body.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const inside = line.slice(name.length + 1, line.lastIndexOf('}'));
    const got = Object.fromEntries([...inside.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}
