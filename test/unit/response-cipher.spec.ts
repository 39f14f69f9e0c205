import { describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { inspect } from 'node:util';
import { ResponseCipher, ResponseDecryptionError } from '../../lib/response-cipher.js';

const keyA = randomBytes(32);
const keyB = randomBytes(32);
const response = {
  headers: { 'content-type': 'application/json', location: '/cards/4242' },
  body: Buffer.from('{"card":"4242424242424242","holder":"Ada Lovelace"}'),
};
const aad = ResponseCipher.aad(['rec-1', 'alice', 'POST /cards', 'key-1', 'a'.repeat(64), 201]);

describe('ResponseCipher', () => {
  it('round-trips headers and body, with a fresh IV each time and no plaintext in the blob', () => {
    const cipher = new ResponseCipher({ keys: { a: keyA }, activeKeyId: 'a' });
    const first = cipher.seal(response, aad);
    const second = cipher.seal(response, aad);
    expect(first.keyId).toBe('a');
    expect(first.sealed.subarray(0, 12).equals(second.sealed.subarray(0, 12))).toBe(false);
    expect(first.sealed.includes(Buffer.from('4242'))).toBe(false);
    expect(first.sealed.includes(Buffer.from('cards'))).toBe(false);
    // iv (12) + tag (16) + length (4) + headers JSON + body
    expect(first.sealed.length).toBe(
      12 + 16 + 4 + JSON.stringify(response.headers).length + response.body.length,
    );
    expect(cipher.open('a', first.sealed, aad)).toEqual(response);
    expect(
      cipher.open('a', cipher.seal({ headers: {}, body: Buffer.alloc(0) }, aad).sealed, aad),
    ).toEqual({ headers: {}, body: Buffer.alloc(0) });
  });

  it('refuses an unknown key id, and a key id that names another key', () => {
    const cipher = new ResponseCipher({ keys: { a: keyA, b: keyB }, activeKeyId: 'a' });
    const { sealed } = cipher.seal(response, aad);
    expect(() => cipher.open('gone', sealed, aad)).toThrow(ResponseDecryptionError);
    expect(() => cipher.open('gone', sealed, aad)).toThrow(/key id "gone" is not configured/);
    expect(() => cipher.open('b', sealed, aad)).toThrow(/authentication failed/);
  });

  it('refuses tampered bytes anywhere: IV, tag, ciphertext, or a truncated blob', () => {
    const cipher = new ResponseCipher({ keys: { a: keyA }, activeKeyId: 'a' });
    const { sealed } = cipher.seal(response, aad);
    for (const at of [0, 12, 28, sealed.length - 1]) {
      const tampered = Buffer.from(sealed);
      tampered[at] ^= 0x01;
      expect(() => cipher.open('a', tampered, aad)).toThrow(/authentication failed/);
    }
    expect(() => cipher.open('a', sealed.subarray(0, 20), aad)).toThrow(/truncated/);
  });

  it('refuses the blob of another row, user or status (AAD mismatch)', () => {
    const cipher = new ResponseCipher({ keys: { a: keyA }, activeKeyId: 'a' });
    const { sealed } = cipher.seal(response, aad);
    const parts = ['rec-1', 'alice', 'POST /cards', 'key-1', 'a'.repeat(64), 201] as const;
    for (let i = 0; i < parts.length; i++) {
      const other: (string | number)[] = [...parts];
      other[i] = typeof parts[i] === 'number' ? 200 : `${parts[i]}x`;
      expect(() => cipher.open('a', sealed, ResponseCipher.aad(other))).toThrow(
        /authentication failed/,
      );
    }
  });

  it('rotates: the active key seals, every listed key opens', () => {
    const before = new ResponseCipher({ keys: { a: keyA }, activeKeyId: 'a' });
    const old = before.seal(response, aad);
    const after = new ResponseCipher({
      keys: { a: keyA.toString('base64'), b: keyB },
      activeKeyId: 'b',
    });
    const fresh = after.seal(response, aad);
    expect(fresh.keyId).toBe('b');
    expect(after.open('a', old.sealed, aad)).toEqual(response);
    expect(after.open('b', fresh.sealed, aad)).toEqual(response);
    expect(() => before.open('b', fresh.sealed, aad)).toThrow(/not configured/);
  });

  it.each([
    [{ keys: {}, activeKeyId: 'a' }, /encryption.keys must list at least one key/],
    [
      { keys: { a: randomBytes(31) }, activeKeyId: 'a' },
      /keys\["a"\] must be exactly 32 bytes.*got 31/,
    ],
    [{ keys: { a: randomBytes(33) }, activeKeyId: 'a' }, /exactly 32 bytes.*got 33/],
    [{ keys: { a: randomBytes(16).toString('base64') }, activeKeyId: 'a' }, /got 16/],
    [{ keys: { a: keyA.toString('hex') }, activeKeyId: 'a' }, /got 48/],
    [{ keys: { a: 'not base64!' }, activeKeyId: 'a' }, /must be a Buffer or a base64 string/],
    [{ keys: { a: 42 }, activeKeyId: 'a' }, /must be a Buffer or a base64 string/],
    [
      { keys: { a: keyA }, activeKeyId: 'b' },
      /activeKeyId "b" is not one of encryption.keys \(a\)/,
    ],
    [{ keys: { a: keyA } }, /activeKeyId undefined is not one of/],
    [{ keys: { 'a b': keyA }, activeKeyId: 'a b' }, /key id "a b" must be 1-64 visible ASCII/],
  ])('refuses a bad configuration at start-up: %#', (options, message) => {
    expect(() => new ResponseCipher(options as never)).toThrow(message);
  });

  it('never shows key material when inspected or serialized', () => {
    const cipher = new ResponseCipher({ keys: { a: keyA }, activeKeyId: 'a' });
    expect(inspect(cipher, { depth: 5, showHidden: true })).toBe(
      "ResponseCipher { activeKeyId: 'a' }",
    );
    expect(JSON.stringify(cipher)).toBe('{"activeKeyId":"a"}');
  });
});
