/**
 * The part of autocannon's programmatic API the benchmark uses. autocannon ships no types
 * and @types/autocannon is not a dependency, so they are declared here.
 */
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  namespace autocannon {
    interface Request {
      method?: string;
      path?: string;
      headers?: Record<string, string>;
      body?: string;
      /** Called before each request is sent; returns the request to send (a fresh body, say). */
      setupRequest?: (request: Request, context: Record<string, unknown>) => Request | undefined;
      /** Called with each response's status and body. */
      onResponse?: (status: number, body: string, context: Record<string, unknown>) => void;
    }

    interface Options {
      url: string;
      connections?: number;
      duration?: number;
      timeout?: number;
      pipelining?: number;
      method?: string;
      headers?: Record<string, string>;
      requests?: Request[];
    }

    /** Percentiles of a histogram, as autocannon reports them (latency in ms). */
    interface Histogram {
      average: number;
      mean: number;
      stddev: number;
      min: number;
      max: number;
      total: number;
      p50: number;
      p90: number;
      p97_5: number;
      p99: number;
    }

    interface Result {
      duration: number;
      errors: number;
      timeouts: number;
      non2xx: number;
      resets: number;
      '2xx': number;
      statusCodeStats: Record<string, { count: number }>;
      latency: Histogram & { totalCount: number };
      requests: Histogram & { sent: number };
      throughput: Histogram;
    }

    /**
     * Emits 'response' (client, statusCode: number, bytes: number, responseTimeMs: number)
     * for every response, with the time measured in fractions of a millisecond.
     */
    interface Instance extends EventEmitter, PromiseLike<Result> {
      stop(): void;
    }
  }

  function autocannon(options: autocannon.Options): autocannon.Instance;
  export = autocannon;
}
