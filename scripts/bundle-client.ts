/** Part of `npm run build`: writes the hosted form's browser script next to the compiled code. */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { bundleClient } from '../src/modules/hosted/bundle.js';

const source = fileURLToPath(new URL('../src/modules/hosted/client/main.ts', import.meta.url));
const target = fileURLToPath(new URL('../dist/modules/hosted/client.bundle.js', import.meta.url));
writeFileSync(target, await bundleClient(source));
