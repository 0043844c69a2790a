import type { Clock } from '../../src/clock.js';

/**
 * The limiter's windows are fixed ones of the clock (src/http/rate-limiter.ts): calls that a
 * test counts against a limit must fall in one window, as a window that ends between two calls
 * counts nothing comparable (a CI run once crossed a minute's end between two calls and found
 * the remaining calls grown by 16; another, six wrong passwords across a quarter hour's end, all
 * answered 401).
 */

/**
 * For processes on the real clock: waits out the end of the current window of windowMs when it
 * is less than needMs away.
 */
export async function awayFromWindowEnd(windowMs: number, needMs: number): Promise<void> {
  const left = windowMs - (Date.now() % windowMs);
  if (left < needMs) await new Promise((resolve) => setTimeout(resolve, left + 50));
}

/** awayFromWindowEnd for the per-minute windows. */
export function awayFromMinuteEnd(needMs: number): Promise<void> {
  return awayFromWindowEnd(60_000, needMs);
}

/**
 * For a test app's clock: moves it to the start of the next window of windowMs, without waiting;
 * the clocks of other apps that count in the same windows (through one Redis) by as much.
 */
export function toWindowStart(clock: Clock, windowMs: number, ...others: Clock[]): void {
  const ahead = windowMs - (clock.now() % windowMs);
  for (const c of [clock, ...others]) c.advance(ahead);
}
