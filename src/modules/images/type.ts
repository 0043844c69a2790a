import { BadRequestError } from '../../errors.js';

export type ImageType = 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp';

/**
 * The image types that option images and portal avatars take, told by their first bytes,
 * never by a name or a declared type.
 */
export function imageTypeOf(bytes: Buffer): ImageType | undefined {
  const starts = (sig: number[], at = 0) => bytes.length >= at + sig.length && sig.every((b, i) => bytes[at + i] === b);
  if (starts([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return 'image/png';
  if (starts([0xff, 0xd8, 0xff])) return 'image/jpeg';
  if (starts([...Buffer.from('GIF87a')]) || starts([...Buffer.from('GIF89a')])) return 'image/gif';
  if (starts([...Buffer.from('RIFF')]) && starts([...Buffer.from('WEBP')], 8)) return 'image/webp';
  return undefined;
}

/** The type of an uploaded image, or 400 invalid_image when its bytes are not one that is taken. */
export function requireImageType(bytes: Buffer): ImageType {
  const type = imageTypeOf(bytes);
  if (!type) throw new BadRequestError('invalid_image', 'The file is not a PNG, JPEG, GIF or WebP image');
  return type;
}
