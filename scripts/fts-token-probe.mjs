// Asks SQLite's FTS5 (unicode61, as submissions_fts is made) which characters it keeps in
// tokens: of the code points given, or of every one that JavaScript counts as a letter or
// digit (lower case, composed no further) when none are given.
import SQLite from 'better-sqlite3';

export function letterCandidates() {
  const letter = /^[\p{L}\p{N}]$/u;
  const candidates = [];
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    const ch = String.fromCodePoint(cp);
    if (letter.test(ch) && ch.normalize('NFD') === ch && ch.toLowerCase() === ch) candidates.push(cp);
  }
  return candidates;
}

/** The code points of `candidates` that FTS5 keeps in tokens. */
export function ftsKept(candidates) {
  const db = new SQLite(':memory:');
  try {
    db.exec(`CREATE VIRTUAL TABLE probe USING fts5(content, tokenize="unicode61 remove_diacritics 2 tokenchars '_'")`);
    db.exec(`CREATE VIRTUAL TABLE probe_vocab USING fts5vocab(probe, 'instance')`);
    // One document: each candidate after a 'q', apart. Each pair is one token, at the
    // candidate's own position: 'q' and the character when FTS5 keeps it, 'q' alone when not.
    db.prepare('INSERT INTO probe (rowid, content) VALUES (1, ?)').run(
      candidates.map((cp) => `q${String.fromCodePoint(cp)}`).join(' '),
    );
    const tokens = db.prepare('SELECT term, "offset" AS at FROM probe_vocab').all();
    if (tokens.length !== candidates.length)
      throw new Error(`${tokens.length} tokens for ${candidates.length} candidates`);
    return new Set(tokens.filter((t) => t.term !== 'q').map((t) => candidates[t.at]));
  } finally {
    db.close();
  }
}

/** Sorted code points as [first, last] ranges. */
export function rangesOf(codePoints) {
  const ranges = [];
  for (const cp of codePoints) {
    const last = ranges[ranges.length - 1];
    if (last && last[1] === cp - 1) last[1] = cp;
    else ranges.push([cp, cp]);
  }
  return ranges;
}

/** A character class body of ranges, with \u{…} escapes, as FTS_TOKEN_CHARS holds it. */
export function classOf(ranges) {
  const hex = (cp) => `\\u{${cp.toString(16)}}`;
  return ranges.map(([a, b]) => (a === b ? hex(a) : `${hex(a)}-${hex(b)}`)).join('');
}
