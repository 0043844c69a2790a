/** See test-entry.mjs. */
export function entrySource(files: { name: string; specifier: string }[], lingerSeconds: number): string;
