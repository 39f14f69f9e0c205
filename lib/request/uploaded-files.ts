import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { ProblemCode } from '../idempotency.constants.js';
import type { IdempotencyRequest } from '../interfaces/idempotency-module-options.interface.js';
import { RequestRefusedError } from './request-refused.error.js';

/** The part of an uploaded file that makes it this file: its bytes stand for themselves as a hash. */
export interface UploadedFileDigest {
  field: string;
  name: string;
  type: string;
  size: number;
  sha256: string;
}

/** multer's file shape (`req.file`, `req.files`), as far as the fingerprint reads it. */
interface MulterFile {
  fieldname: string;
  originalname: string;
  mimetype: string;
  size: number;
  buffer?: Buffer;
  path?: string;
}

/** What multer puts there: an object. `@fastify/multipart` puts methods (`req.file()`) on every request. */
const multerShaped = <T>(value: T): T | undefined =>
  value !== null && typeof value === 'object' ? value : undefined;

/** Whether multer left uploads on the request. */
export const hasUploads = (req: IdempotencyRequest): boolean =>
  multerShaped(req.file) !== undefined || multerShaped(req.files) !== undefined;

/**
 * Digests of multer's uploads (`FileInterceptor`, `FilesInterceptor`, `FileFieldsInterceptor`,
 * `AnyFilesInterceptor`), or undefined when the request has none. Memory storage is hashed from
 * the buffer, disk storage from the file on disk; anything else cannot be compared and is refused.
 */
export async function uploadedFiles(req: IdempotencyRequest): Promise<object | undefined> {
  if (!hasUploads(req)) return undefined;
  const file: MulterFile | undefined = multerShaped(req.file);
  const files: MulterFile[] | Record<string, MulterFile[]> | undefined = multerShaped(req.files);
  const out: Record<string, unknown> = {};
  if (file) out.file = await digest(file);
  if (Array.isArray(files)) out.files = await Promise.all(files.map(digest));
  else if (files) {
    const byField: Record<string, UploadedFileDigest[]> = {};
    for (const [field, list] of Object.entries(files)) {
      byField[field] = await Promise.all(list.map(digest));
    }
    out.files = byField;
  }
  return out;
}

async function digest(f: MulterFile): Promise<UploadedFileDigest> {
  let sha256: string;
  if (Buffer.isBuffer(f.buffer)) sha256 = createHash('sha256').update(f.buffer).digest('hex');
  else if (typeof f.path === 'string') sha256 = await hashFile(f.path);
  else {
    throw new RequestRefusedError(
      500,
      ProblemCode.Misconfigured,
      `uploaded file "${f.fieldname}" has neither a buffer nor a path, so it cannot be fingerprinted; use multer's memoryStorage or diskStorage`,
    );
  }
  return { field: f.fieldname, name: f.originalname, type: f.mimetype, size: f.size, sha256 };
}

function hashFile(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const hash = createHash('sha256');
    createReadStream(path)
      .on('error', reject)
      .on('data', (chunk) => hash.update(chunk))
      .on('end', () => resolve(hash.digest('hex')));
  });
}
