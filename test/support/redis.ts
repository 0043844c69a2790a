import { connect } from 'node:net';

/** Whether a Redis server answers PING at url within a second (tests and benchmarks that need one skip without it). */
export function redisAnswers(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect(Number(port || 6379), hostname);
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => done(d.toString().startsWith('+PONG')));
  });
}
