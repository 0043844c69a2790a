import { createHmac, timingSafeEqual } from 'node:crypto';

/** The service upload URL's signature: an HMAC of the fileKey and expiry with SECRET_KEY. */
function sign(secretKey: string, fileKey: string, expires: number): string {
  return createHmac('sha256', secretKey).update(`formwork-upload:${fileKey}:${expires}`).digest('base64url');
}

/** The path and query of a service upload URL; expires is in epoch seconds. */
export function signedUploadPath(secretKey: string, fileKey: string, expires: number): string {
  return `/uploads/${fileKey}?expires=${expires}&signature=${sign(secretKey, fileKey, expires)}`;
}

export function signatureMatches(secretKey: string, fileKey: string, expires: number, signature: string): boolean {
  const want = Buffer.from(sign(secretKey, fileKey, expires));
  const got = Buffer.from(signature);
  return got.length === want.length && timingSafeEqual(got, want);
}
