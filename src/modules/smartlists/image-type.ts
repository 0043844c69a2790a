/** The image types an option takes, told by their first bytes, never by a name or a declared type. */
export function imageTypeOf(bytes: Buffer): 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp' | undefined {
  const starts = (sig: number[], at = 0) => bytes.length >= at + sig.length && sig.every((b, i) => bytes[at + i] === b);
  if (starts([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return 'image/png';
  if (starts([0xff, 0xd8, 0xff])) return 'image/jpeg';
  if (starts([...Buffer.from('GIF87a')]) || starts([...Buffer.from('GIF89a')])) return 'image/gif';
  if (starts([...Buffer.from('RIFF')]) && starts([...Buffer.from('WEBP')], 8)) return 'image/webp';
  return undefined;
}
