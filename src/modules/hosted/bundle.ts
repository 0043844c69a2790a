import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * The hosted form's script: client/main.ts with what it imports (the logic and checks of
 * submissions/values.ts, the input reading of form-model.ts), bundled for the browser. Run
 * from source (tsx: dev, tests) it is bundled here on first use; `npm run build` writes the
 * bundle next to the compiled code (scripts/bundle-client.ts), which is read instead.
 */
const SOURCE = fileURLToPath(new URL('./client/main.ts', import.meta.url));
export const BUILT = fileURLToPath(new URL('./client.bundle.js', import.meta.url));

export interface Bundle {
  code: string;
  /** A short hash of the code, in its URL, so that it can be cached for good. */
  hash: string;
}

export async function bundleClient(source = SOURCE): Promise<string> {
  const { build } = await import('esbuild');
  const result = await build({
    entryPoints: [source],
    bundle: true,
    write: false,
    minify: true,
    format: 'iife',
    target: ['es2020'],
    platform: 'browser',
    legalComments: 'none',
  });
  return result.outputFiles[0]!.text;
}

let loading: Promise<Bundle> | undefined;

export function clientBundle(): Promise<Bundle> {
  loading ??= (async () => {
    const code = existsSync(SOURCE) ? await bundleClient() : readFileSync(BUILT, 'utf8');
    return { code, hash: createHash('sha256').update(code).digest('hex').slice(0, 12) };
  })();
  return loading;
}
