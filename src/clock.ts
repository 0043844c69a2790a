/**
 * The time as services see it. Production reads the system clock; tests move it forward
 * (upload URL expiry, job backoff) without waiting.
 *
 * This is the one place that reads the system clock: the linter refuses Date.now() and
 * new Date() without arguments everywhere else in src/ (eslint.config.js).
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

  /**
   * The system clock's reading at the moment this clock reads ms, and back: for a library
   * that reads the system clock itself (@node-oauth/oauth2-server sets and checks expiry
   * dates against new Date()), so that it agrees with the services on what has expired.
   */
  toSystem(ms: number): number {
    return ms - this.offsetMs;
  }

  fromSystem(systemMs: number): number {
    return systemMs + this.offsetMs;
  }
}
