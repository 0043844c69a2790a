/** Seconds until the quota window that an answer's RateLimit header names (`"burst";r=999;t=42`) resets. */
export function quotaResetsIn(headers: Headers): number {
  return Number(/;t=(\d+)/.exec(headers.get('ratelimit') ?? '')?.[1]);
}

/**
 * The first of calls whose quota counts a test compares, made where they all fall in one window:
 * when the window of the first call ends within `seconds`, it waits for the next one and calls
 * again. A window that ends between two of them counts nothing comparable (a CI run once crossed
 * a minute's end between two calls and found the remaining calls grown by 16).
 */
export async function inOneQuotaWindow<R>(call: () => Promise<R>, headers: (r: R) => Headers, seconds = 3): Promise<R> {
  const first = await call();
  const left = quotaResetsIn(headers(first));
  if (!(left <= seconds)) return first;
  await new Promise((resolve) => setTimeout(resolve, (left + 1) * 1000));
  return call();
}
