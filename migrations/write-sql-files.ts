import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { idempotencySqlFiles } from './index.js';

/** `npm run sql:generate` (from the repo root): rewrites the plain `.sql` files from the sources. */
for (const [file, text] of Object.entries(idempotencySqlFiles())) {
  writeFileSync(join(process.cwd(), 'migrations', file), text);
}
