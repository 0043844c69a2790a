import { join } from 'node:path';
import type { Config } from '../config.js';
import { LocalStorage } from './local.js';
import { S3Storage } from './s3.js';
import type { Storage } from './types.js';

export * from './types.js';

/** The driver the settings name: local disk under DATA_DIR/files, or an S3-compatible bucket. */
export function createStorage(config: Config): Storage {
  if (config.storage.driver === 's3') return new S3Storage(config.storage.s3);
  return new LocalStorage(join(config.dataDir, 'files'));
}
