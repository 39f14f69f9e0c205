import {
  createCipheriv,
  createDecipheriv,
  createSecretKey,
  type KeyObject,
  randomBytes,
} from 'node:crypto';
import type { IdempotencyEncryptionOptions } from './interfaces/idempotency-module-options.interface.js';

const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;
const KEY_ID = /^[\x21-\x7e]{1,64}$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** A stored response before encryption: the replayed headers and the body bytes. */
export interface SealedResponse {
  headers: Record<string, string>;
  body: Buffer;
}

/** Why a stored response could not be opened; the message never contains key material. */
export class ResponseDecryptionError extends Error {}

function fail(message: string): never {
  throw new Error(`nestjs-pg-idempotency: ${message}`);
}

function keyBytes(id: string, value: unknown): Buffer {
  let bytes: Buffer;
  if (Buffer.isBuffer(value) || value instanceof Uint8Array) bytes = Buffer.from(value);
  else if (typeof value === 'string' && BASE64.test(value)) bytes = Buffer.from(value, 'base64');
  else fail(`encryption.keys[${JSON.stringify(id)}] must be a Buffer or a base64 string`);
  if (bytes.length !== KEY_BYTES) {
    fail(
      `encryption.keys[${JSON.stringify(id)}] must be exactly ${KEY_BYTES} bytes (AES-256), got ${bytes.length}`,
    );
  }
  return bytes;
}

/**
 * AES-256-GCM for stored responses, with key rotation: the active key seals new responses,
 * every configured key opens old ones (the key id is stored next to each row).
 *
 * Sealed layout (in `response_raw`): `iv (12 bytes) | tag (16 bytes) | ciphertext`, a fresh random
 * IV per row. Plaintext: `headers JSON length (uint32 BE) | headers JSON (UTF-8) | body bytes`.
 * The additional authenticated data binds the ciphertext to its row (see `aad`), so bytes copied
 * onto another row, user or status do not open.
 */
export class ResponseCipher {
  readonly #keys = new Map<string, KeyObject>();
  readonly activeKeyId: string;

  /** Validates the keys once at start-up; errors name the faulty setting, never a key. */
  constructor(options: IdempotencyEncryptionOptions) {
    if (!options || typeof options !== 'object') fail('encryption must be an object');
    const entries = Object.entries(options.keys ?? {});
    if (entries.length === 0) fail('encryption.keys must list at least one key');
    for (const [id, value] of entries) {
      if (!KEY_ID.test(id)) {
        fail(`encryption key id ${JSON.stringify(id)} must be 1-64 visible ASCII characters`);
      }
      this.#keys.set(id, createSecretKey(keyBytes(id, value)));
    }
    if (typeof options.activeKeyId !== 'string' || !this.#keys.has(options.activeKeyId)) {
      fail(
        `encryption.activeKeyId ${JSON.stringify(options.activeKeyId)} is not one of encryption.keys (${[...this.#keys.keys()].join(', ')})`,
      );
    }
    this.activeKeyId = options.activeKeyId;
  }

  /** Additional authenticated data: the row and what it answers. */
  static aad(parts: readonly (string | number)[]): Buffer {
    return Buffer.from(JSON.stringify(['nestjs-pg-idempotency:response:v1', ...parts]));
  }

  seal(response: SealedResponse, aad: Buffer): { keyId: string; sealed: Buffer } {
    const headers = Buffer.from(JSON.stringify(response.headers));
    const length = Buffer.alloc(4);
    length.writeUInt32BE(headers.length);
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#keys.get(this.activeKeyId)!, iv);
    cipher.setAAD(aad);
    const encrypted = [length, headers, response.body].map((part) => cipher.update(part));
    const final = cipher.final();
    return {
      keyId: this.activeKeyId,
      sealed: Buffer.concat([iv, cipher.getAuthTag(), ...encrypted, final]),
    };
  }

  /** @throws ResponseDecryptionError for an unknown key id, tampered bytes or another row's AAD. */
  open(keyId: string, sealed: Buffer, aad: Buffer): SealedResponse {
    const key = this.#keys.get(keyId);
    if (!key)
      throw new ResponseDecryptionError(`key id ${JSON.stringify(keyId)} is not configured`);
    if (sealed.length < IV_BYTES + TAG_BYTES + 4) {
      throw new ResponseDecryptionError('sealed response is truncated');
    }
    let plain: Buffer;
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, IV_BYTES));
      decipher.setAAD(aad);
      decipher.setAuthTag(sealed.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
      plain = Buffer.concat([
        decipher.update(sealed.subarray(IV_BYTES + TAG_BYTES)),
        decipher.final(),
      ]);
    } catch {
      throw new ResponseDecryptionError(
        'authentication failed (tampered bytes, another row, or another key)',
      );
    }
    const headersEnd = 4 + plain.readUInt32BE(0);
    return {
      headers: JSON.parse(plain.subarray(4, headersEnd).toString('utf8')),
      body: plain.subarray(headersEnd),
    };
  }
}
