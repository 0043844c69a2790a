// The OpenAPI document of the API, written without starting a server: the app is built on a
// throwaway SQLite database and asked for its document, exactly what GET /api/v2025/openapi.json
// serves. `npm run -s openapi > openapi.json` prints it (PUBLIC_URL sets its server URL);
// `npm run lint:openapi` writes it to a temporary file and lints it with Redocly CLI
// (the recommended rules, as redocly.yaml adjusts them).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { openContext } from '../src/server.js';

async function document(dataDir: string): Promise<unknown> {
  // Only what the document shows is taken from the environment: never its database.
  const config = loadConfig({
    DATA_DIR: dataDir,
    LOG_LEVEL: 'silent',
    ...(process.env.PUBLIC_URL ? { PUBLIC_URL: process.env.PUBLIC_URL } : {}),
  });
  const { ctx, close } = await openContext(config);
  try {
    const app = await buildApp(ctx);
    try {
      await app.ready();
      return app.swagger();
    } finally {
      await app.close();
    }
  } finally {
    await close();
  }
}

const root = fileURLToPath(new URL('..', import.meta.url));
const lint = process.argv.includes('--lint');
const dir = mkdtempSync(join(tmpdir(), 'formwork-openapi-'));
let status = 0;
try {
  const text = `${JSON.stringify(await document(join(dir, 'data')), null, 2)}\n`;
  if (!lint) {
    process.stdout.write(text);
  } else {
    const file = join(dir, 'openapi.json');
    writeFileSync(file, text);
    const bin = join(root, 'node_modules', '.bin', 'redocly');
    const result = spawnSync(bin, ['lint', file, '--config', join(root, 'redocly.yaml')], {
      stdio: 'inherit',
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    });
    if (result.error) throw result.error;
    status = result.status ?? 1;
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.exitCode = status;
