/**
 * The tokens of the full-text index, made without a server: SQLite's FTS5 and PostgreSQL's
 * tsvector are given exactly these, so the cases here hold for both databases.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { tsQuery } from '../../src/db/postgres-engine.js';
import { ftsMatch } from '../../src/db/sqlite-engine.js';
import { FTS_TOKEN_CHARS } from '../../src/modules/submissions/fts-token-chars.js';
import { ASCII_WORD, fieldToken, formToken, queryWords, words } from '../../src/modules/submissions/keywords.js';

describe('words', () => {
  it('lower-cases, drops accents and splits on anything that is not a letter or a digit', () => {
    assert.deepEqual(words('Crème Brûlée, 2 portions!'), ['creme', 'brulee', '2', 'portions']);
    assert.deepEqual(words('ÅNGSTRÖM naïve Ça'), ['angstrom', 'naive', 'ca']);
    assert.deepEqual(words('e-mail: ana.lopez@example.com'), ['e', 'mail', 'ana', 'lopez', 'example', 'com']);
  });

  it('drops accents written as separate combining marks as well as precomposed ones', () => {
    assert.deepEqual(words('Jose\u0301'), words('José'));
    assert.deepEqual(words('Jose\u0301'), ['jose']);
  });

  it('keeps letters that have no accent to drop, and scripts without spaces as one word per run', () => {
    assert.deepEqual(words('Straße Øre Łódź'), ['straße', 'øre', 'łodz']);
    assert.deepEqual(words('日本語 テキスト'), ['日本語', 'テキスト']);
    assert.deepEqual(words('Москва́'), ['москва']);
  });

  it('splits on underscores, so that no word can look like a field or form token', () => {
    assert.deepEqual(words('_form7 _f12x616263 snake_case'), ['form7', 'f12x616263', 'snake', 'case']);
    for (const w of words('__ _x_ a_b _form1*')) assert.ok(!w.includes('_'), w);
  });

  it('lets no query syntax through', () => {
    assert.deepEqual(words("\" OR 1=1 -- 'x':* & | NEAR(a b)"), ['or', '1', '1', 'x', 'near', 'a', 'b']);
  });

  it('splits ASCII text (its own faster class) exactly as the class of every letter and digit does', () => {
    const word = new RegExp(`^[${FTS_TOKEN_CHARS}]$`, 'u');
    const ascii = new RegExp(`^${ASCII_WORD.source.replace('+', '')}$`);
    for (let c = 0; c < 128; c++) {
      const ch = String.fromCharCode(c).toLowerCase();
      assert.equal(ascii.test(ch), word.test(ch), `U+${c.toString(16)}`);
    }
    // The same text split both ways: ASCII alone, and with a non-ASCII letter that takes the general path.
    let text = '';
    for (let i = 0; i < 2000; i++) text += String.fromCharCode((i * 7919) % 128);
    assert.deepEqual([...words(text), 'é'.normalize('NFD')[0]], words(`${text} é`));
    assert.equal(words(`${'a'.repeat(250)} B`)[0]!.length, 200);
  });

  it('gives nothing for text without letters or digits', () => {
    assert.deepEqual(words(''), []);
    assert.deepEqual(words(' \t\n-_.,;:!?'), []);
    assert.deepEqual(words('😀 🎉'), []);
  });

  it('cuts a word after 200 characters, counting characters and not UTF-16 units', () => {
    assert.deepEqual(words('a'.repeat(250)), ['a'.repeat(200)]);
    assert.deepEqual(words('a'.repeat(200)), ['a'.repeat(200)]);
    // U+20000 is a letter outside the Basic Multilingual Plane: two UTF-16 units each.
    const [long] = words('\u{20000}'.repeat(201));
    assert.equal([...long!].length, 200);
    assert.equal(long, '\u{20000}'.repeat(200));
  });

  it('cuts what is searched as it cuts what is stored, so a long word still finds itself as a prefix', () => {
    const text = `x${'é'.repeat(300)}`;
    const [stored] = words(text);
    const [searched] = queryWords(text);
    assert.equal(searched, stored);
  });
  it('splits text as the regular expressions it was once split by, for every code point and its neighbours', () => {
    // The earlier implementation, kept here as the oracle: every stored token was made by it.
    const WORD = new RegExp(`[${FTS_TOKEN_CHARS}]+`, 'gu');
    const before = (text: string): string[] =>
      text
        .normalize('NFD')
        .replace(/\p{M}+/gu, '')
        .toLowerCase()
        .match(WORD)
        ?.map((w) => (w.length > 200 ? [...w].slice(0, 200).join('') : w)) ?? [];
    const check = (text: string) => assert.deepEqual(words(text), before(text), JSON.stringify(text));
    const all: string[] = [];
    for (let c = 0x80; c < 0x110000; c++) if (c < 0xd800 || c > 0xdfff) all.push(String.fromCodePoint(c));
    // Runs of neighbours, alone, between ASCII letters, with combining marks (U+0301, and U+0903
    // a spacing one) between them, and around capital sigma (whose lower case depends on them).
    for (let i = 0; i < all.length; i += 500) {
      const run = all.slice(i, i + 500);
      check(run.join(''));
      check(run.join('a'));
      check(run.join('\u0301'));
      check(`Σ${run.join('\u0903Σ')}Σ`);
      check(`AΣ${run.join('\u0301 ')}`);
    }
    // Lone surrogates, marks at the edges, a long accented word.
    check('a\ud800b\udc00c\u0301');
    check('\u0301\u0301abc\u0301 \u0301');
    check(`x${'é'.repeat(300)} ${'\u{20000}\u0301'.repeat(250)}`);
    check('ΑΣ\u0903Α ΑΣ\u0301 ΑΣ. Σ');
  });
});

describe('queryWords', () => {
  it('keeps each word once, in order', () => {
    assert.deepEqual(queryWords('Café cafe CAFÉ latte'), ['cafe', 'latte']);
  });

  it('keeps at most ten words', () => {
    const query = Array.from({ length: 15 }, (_, i) => `w${i}`).join(' ');
    assert.deepEqual(
      queryWords(query),
      Array.from({ length: 10 }, (_, i) => `w${i}`),
    );
  });

  it('gives nothing for a query without words', () => {
    assert.deepEqual(queryWords('*** ---'), []);
  });
});

describe('field and form tokens', () => {
  it('hold the field id and the hex of the UTF-8 value', () => {
    assert.equal(fieldToken(12, 'abc'), '_f12x616263');
    assert.equal(fieldToken(3, 'é'), '_f3xc3a9');
    assert.equal(fieldToken(3, ''), '_f3x');
    // ASCII takes its own path: every character of it, and mixed with the rest, is UTF-8's hex.
    const ascii = Array.from({ length: 128 }, (_, c) => String.fromCharCode(c)).join('');
    for (const text of [ascii, `${ascii}é`, 'ü', 'a😀b'])
      assert.equal(fieldToken(9, text), `_f9x${Buffer.from(text, 'utf8').toString('hex')}`);
    // ASCII tokens are spelled in one reused buffer: longer ones than it held, then shorter ones
    // again (nothing of a longer one left over), under ids of every length.
    for (const text of ['x'.repeat(1000), ascii.repeat(5), 'ab', '', 'a'.repeat(3000), 'z'])
      for (const id of [1, 42, 1234567])
        assert.equal(fieldToken(id, text), `_f${id}x${Buffer.from(text, 'utf8').toString('hex')}`);
    assert.equal(formToken(7), '_form7');
  });

  it('keep the start of a value a prefix of the value, in any script', () => {
    for (const [start, whole] of [
      ['caf', 'café'],
      ['ca', 'café'],
      ['日本', '日本語'],
      ['ana lo', 'ana lopez'],
    ] as const) {
      assert.ok(fieldToken(5, whole).startsWith(fieldToken(5, start)), `${start} / ${whole}`);
    }
  });

  it('do not let one field id pass for another by prefix', () => {
    // _f1x… is no prefix of _f12x…: the x closes the id.
    assert.ok(!fieldToken(12, 'a').startsWith(fieldToken(1, '')));
  });

  it('hold only letters, digits and underscores', () => {
    for (const token of [fieldToken(99, "\" OR 'x':* & |"), fieldToken(1, 'Москва 😀'), formToken(2_147_483_647)]) {
      assert.match(token, /^[a-z0-9_]+$/);
    }
  });
});

describe('match expressions', () => {
  const terms = [
    { token: 'creme', prefix: true },
    { token: fieldToken(4, 'sales'), prefix: false },
    { token: formToken(9), prefix: false },
  ];

  it('make an FTS5 MATCH expression in which every term must appear', () => {
    assert.equal(ftsMatch(terms), '"creme"* AND "_f4x73616c6573" AND "_form9"');
  });

  it('make a PostgreSQL tsquery in which every term must appear', () => {
    assert.equal(tsQuery(terms), "'creme':* & '_f4x73616c6573' & '_form9'");
  });

  it('make one term alone without a connective', () => {
    assert.equal(ftsMatch([{ token: 'a', prefix: false }]), '"a"');
    assert.equal(tsQuery([{ token: 'a', prefix: true }]), "'a':*");
  });
});
