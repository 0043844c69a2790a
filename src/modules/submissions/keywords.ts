/**
 * Words for keyword search, made the same way for what is stored and what is searched,
 * so that SQLite's FTS5 and PostgreSQL's tsvector see identical tokens: lower case,
 * accents removed, split on anything that is not a letter or a digit.
 */
export function words(text: string): string[] {
  return (
    text
      .normalize('NFD')
      .replace(/\p{M}+/gu, '')
      .toLowerCase()
      .match(/[\p{L}\p{N}]+/gu) ?? []
  );
}

/** The distinct words of a keyword query, at most 10 (more narrows nothing useful and costs more). */
export function queryWords(keyword: string): string[] {
  return [...new Set(words(keyword))].slice(0, 10);
}
