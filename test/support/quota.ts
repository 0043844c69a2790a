/**
 * Waits out the end of the current minute when it is less than needMs away, so that calls a
 * test compares by their quota counts all fall in one of the per-minute windows: the limiter's
 * windows are fixed ones of the clock (src/http/rate-limiter.ts), and a window that ends
 * between two calls counts nothing comparable (a CI run once crossed a minute's end between two
 * calls and found the remaining calls grown by 16).
 */
export async function awayFromMinuteEnd(needMs: number): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < needMs) await new Promise((resolve) => setTimeout(resolve, left + 50));
}
