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

await app.listen({ port, host });
process.once('SIGTERM', () => {
  void app.close().then(() => process.exit(0));
});
