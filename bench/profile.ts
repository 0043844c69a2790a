/**
 * Summarises a V8 .cpuprofile (from node --cpu-prof): self time per function and per
 * package, optionally only for the samples inside a time window.
 */
import { readFileSync } from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** Microseconds on the monotonic clock, the one V8 stamps profile samples with. */
export function monotonicMicros(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

export interface Window {
  label: string;
  start: number;
  end: number;
}

function shorten(url: string, root: string): string {
  let u = url.replace(/^file:\/\//, '');
  if (u.startsWith(root)) u = u.slice(root.length).replace(/^\/+/, '');
  return u;
}

/** Where a frame belongs: an npm package, Node's own code, a file of ours, or V8's pseudo frames. */
function area(frame: CallFrame, root: string): string {
  if (frame.url === '') {
    if (frame.functionName.startsWith('(')) return frame.functionName;
    // fast-json-stringify names the serializers it generates anonymous0, anonymous1, ...
    return /^anonymous\d+$/.test(frame.functionName) ? 'fast-json-stringify (generated)' : '(native)';
  }
  const u = shorten(frame.url, root);
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(u);
  if (pkg?.[1]) return pkg[1];
  if (u.startsWith('node:')) return 'node: (core)';
  return u;
}

function pct(part: number, whole: number): string {
  return whole === 0 ? '0.0' : ((100 * part) / whole).toFixed(1);
}

/** Text summary of the samples in the window (or all of them), top `top` functions by self time. */
export function summarizeProfile(file: string, root: string, window?: Window, top = 25): string {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<number, number>();
  let t = profile.startTime;
  let total = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i] ?? 0;
    const next = profile.timeDeltas[i + 1] ?? 0;
    if (window && (t < window.start || t > window.end)) continue;
    const id = profile.samples[i]!;
    self.set(id, (self.get(id) ?? 0) + next);
    total += next;
  }
  const lines: string[] = [];
  if (window && total === 0) {
    lines.push(
      `(no samples inside the "${window.label}" window: clocks differ? summarising the whole profile instead)`,
    );
    return [...lines, summarizeProfile(file, root, undefined, top)].join('\n');
  }

  const keyOf = (frame: CallFrame) =>
    `${frame.functionName || '(anonymous)'}${frame.url === '' ? '' : ` ${shorten(frame.url, root)}`}` +
    // Code loaded through tsx reports line 0 for everything; only real line numbers are shown.
    (frame.lineNumber > 0 ? `:${frame.lineNumber + 1}` : '');

  // Inclusive time of our own functions: each sample counts once for every src/ function on its stack.
  const ownInclusive = new Map<string, number>();
  for (const [id, us] of self) {
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = byId.get(at)!.callFrame;
      if (!frame.url.includes('/src/')) continue;
      const key = keyOf(frame);
      if (seen.has(key)) continue;
      seen.add(key);
      ownInclusive.set(key, (ownInclusive.get(key) ?? 0) + us);
    }
  }

  const fnSelf = new Map<string, number>();
  const areaSelf = new Map<string, number>();
  for (const [id, us] of self) {
    const frame = byId.get(id)!.callFrame;
    const key = keyOf(frame);
    fnSelf.set(key, (fnSelf.get(key) ?? 0) + us);
    const a = area(frame, root);
    areaSelf.set(a, (areaSelf.get(a) ?? 0) + us);
  }
  const idle = areaSelf.get('(idle)') ?? 0;
  lines.push(
    `CPU profile${window ? ` of "${window.label}"` : ''}: ${(total / 1000).toFixed(0)} ms sampled, ` +
      `${pct(total - idle, total)}% busy (idle ${pct(idle, total)}%)`,
  );
  lines.push('Self time by package / file:');
  for (const [a, us] of [...areaSelf].sort((x, y) => y[1] - x[1]).slice(0, 15)) {
    lines.push(`  ${pct(us, total).padStart(5)}%  ${a}`);
  }
  lines.push(`Top ${top} functions by self time:`);
  for (const [key, us] of [...fnSelf].sort((x, y) => y[1] - x[1]).slice(0, top)) {
    lines.push(`  ${pct(us, total).padStart(5)}%  ${key}`);
  }
  lines.push('Inclusive time of src/ functions (with everything they call):');
  for (const [key, us] of [...ownInclusive].sort((x, y) => y[1] - x[1]).slice(0, top)) {
    lines.push(`  ${pct(us, total).padStart(5)}%  ${key}`);
  }
  return lines.join('\n');
}
