import type pg from 'pg';
import { lazyRequire } from '../lazy-require.js';

/** node-postgres, loaded when PostgreSQL is first used: a service on SQLite never needs it. */
export const loadPg = lazyRequire<typeof pg>('pg');
