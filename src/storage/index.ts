import { join } from 'node:path';
import type { Config } from '../config.js';
import { LocalStorage } from './local.js';
import { S3Storage } from './s3.js';
import type { Storage } from './types.js';

export * from './types.js';

/**
 * The driver the settings name: local disk under DATA_DIR/files, or an S3-compatible bucket.
 * writer names this process in what its writes leave behind if it dies mid-write.
 */
export function createStorage(config: Config, options: { writer?: string } = {}): Storage {
  if (config.storage.driver === 's3') return new S3Storage(config.storage.s3);
  return new LocalStorage(join(config.dataDir, 'files'), options.writer);
}
