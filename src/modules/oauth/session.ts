import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Clock } from '../../clock.js';

/**
 * The browser side of the authorization endpoint: a signed session cookie after sign-in,
 * and a CSRF token that is an HMAC of a random cookie (double submit, bound to the secret
 * so a cookie planted by a sibling subdomain alone does not pass).
 */
export const SESSION_COOKIE = 'fw_session';
export const CSRF_COOKIE = 'fw_csrf';
const SESSION_SECONDS = 12 * 3600;
const CHOICE_SECONDS = 600;
const COOKIE_PATH = '/oauth2';

export interface Session {
  userId: number;
  /** A digest of the password hash when signing in: changing the password ends the session. */
  passwordTag: string;
}

function mac(secret: string, purpose: string, value: string): string {
  return createHmac('sha256', secret).update(`${purpose}.${value}`).digest('base64url');
}

function equal(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export function passwordTag(secret: string, passwordHash: string): string {
  return mac(secret, 'password', passwordHash).slice(0, 16);
}

export function readCookies(request: FastifyRequest): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq === -1) continue;
    const name = part.slice(0, eq).trim();
    try {
      out[name] = decodeURIComponent(part.slice(eq + 1).trim());
    } catch {
      // A cookie we did not write; ignore it.
    }
  }
  return out;
}

function cookie(name: string, value: string, secure: boolean, maxAge: number): string {
  return `${name}=${encodeURIComponent(value)}; Path=${COOKIE_PATH}; HttpOnly; SameSite=Lax; Max-Age=${maxAge}${secure ? '; Secure' : ''}`;
}

function appendCookie(reply: FastifyReply, value: string): void {
  const existing = reply.getHeader('set-cookie');
  const list = existing === undefined ? [] : Array.isArray(existing) ? existing : [String(existing)];
  reply.header('set-cookie', [...list, value]);
}

export class Sessions {
  constructor(
    private readonly secret: string,
    private readonly secure: boolean,
    private readonly clock: Clock,
  ) {}

  /** The CSRF token for this browser, setting its cookie when it has none. */
  csrfToken(request: FastifyRequest, reply: FastifyReply): string {
    let nonce = readCookies(request)[CSRF_COOKIE];
    if (!nonce || !/^[A-Za-z0-9_-]{32}$/.test(nonce)) {
      nonce = randomBytes(24).toString('base64url');
      appendCookie(reply, cookie(CSRF_COOKIE, nonce, this.secure, SESSION_SECONDS));
    }
    return mac(this.secret, 'csrf', nonce);
  }

  csrfValid(request: FastifyRequest, token: unknown): boolean {
    const nonce = readCookies(request)[CSRF_COOKIE];
    return typeof token === 'string' && nonce !== undefined && equal(token, mac(this.secret, 'csrf', nonce));
  }

  start(reply: FastifyReply, session: Session): void {
    const payload = `${session.userId}.${this.clock.now() + SESSION_SECONDS * 1000}.${session.passwordTag}`;
    appendCookie(
      reply,
      cookie(SESSION_COOKIE, `${payload}.${mac(this.secret, 'session', payload)}`, this.secure, SESSION_SECONDS),
    );
  }

  end(reply: FastifyReply): void {
    appendCookie(reply, cookie(SESSION_COOKIE, '', this.secure, 0));
  }

  /**
   * Proof, for the account chooser, that the password was right for each of these users: a
   * signed list that a choice posts back, bound to the CSRF token of the page that shows it.
   */
  choiceToken(users: Session[], csrfToken: string): string {
    const payload = `${users.map((u) => `${u.userId}:${u.passwordTag}`).join(',')}.${this.clock.now() + CHOICE_SECONDS * 1000}`;
    return `${payload}.${mac(this.secret, 'choice', `${csrfToken}.${payload}`)}`;
  }

  /** The users a genuine, unexpired choice token names, or undefined. */
  readChoice(token: unknown, csrfToken: unknown): Session[] | undefined {
    if (typeof token !== 'string' || typeof csrfToken !== 'string') return undefined;
    const dot = token.lastIndexOf('.');
    if (dot === -1) return undefined;
    const payload = token.slice(0, dot);
    if (!equal(token.slice(dot + 1), mac(this.secret, 'choice', `${csrfToken}.${payload}`))) return undefined;
    const [list, expires] = payload.split('.');
    if (!list || !expires || Number(expires) < this.clock.now()) return undefined;
    return list.split(',').map((entry) => {
      const [userId, tag] = entry.split(':');
      return { userId: Number(userId), passwordTag: tag ?? '' };
    });
  }

  /** The signed-in user of this browser, if the cookie is genuine and not expired. */
  read(request: FastifyRequest): Session | undefined {
    const value = readCookies(request)[SESSION_COOKIE];
    if (!value) return undefined;
    const dot = value.lastIndexOf('.');
    const payload = value.slice(0, dot);
    if (dot === -1 || !equal(value.slice(dot + 1), mac(this.secret, 'session', payload))) return undefined;
    const [userId, expires, tag] = payload.split('.');
    if (!userId || !expires || !tag || Number(expires) < this.clock.now()) return undefined;
    return { userId: Number(userId), passwordTag: tag };
  }
}
