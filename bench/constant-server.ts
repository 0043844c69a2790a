/**
 * The ceiling: a plain Fastify server with one route that returns a constant JSON object.
 * Started by bench/run.ts as a child process; listens on PORT (HOST, default 127.0.0.1).
 */
import Fastify from 'fastify';

const port = Number(process.env.PORT ?? '0');
const host = process.env.HOST ?? '127.0.0.1';

const app = Fastify({ logger: false });
const body = { status: 'ok', service: 'constant', version: 1 };
app.get('/', () => body);

// The same kind of route with a body as large as a given response, to show what the size
// of a response alone costs. Bodies are made once per size and then sent as they are.
const sized = new Map<number, string>();
app.get<{ Querystring: { bytes?: string } }>('/sized', (req, reply) => {
  const bytes = Math.min(Math.max(Number(req.query.bytes) || 0, 20), 10_000_000);
  let text = sized.get(bytes);
  if (text === undefined) {
    text = JSON.stringify({ padding: 'x'.repeat(bytes - 15) });
    sized.set(bytes, text);
  }
  return reply.type('application/json; charset=utf-8').send(text);
});

await app.listen({ port, host });
process.once('SIGTERM', () => {
  void app.close().then(() => process.exit(0));
});
