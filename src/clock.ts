/**
 * The time as services see it. Production reads the system clock; tests move it forward
 * (upload URL expiry, job backoff) without waiting.
 */
export class Clock {
  private offsetMs = 0;

  now(): number {
    return Date.now() + this.offsetMs;
  }

  /** Moves this process's time forward (tests only). */
  advance(ms: number): void {
    this.offsetMs += ms;
  }
}
