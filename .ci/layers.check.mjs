// The one place that says how lib/ is layered. Every import inside lib/ must point to its own room
// or to a room of a LOWER layer; rooms of one layer never import each other, and no files import
// each other in a circle. Run by `npm run lint`.
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';

/** Top layer first. A room is a folder (ends with `/`) or one file; the longest match wins. */
export const LAYERS = [
  ['lib/index.ts', 'lib/testing/', 'lib/adapters/'],
  ['lib/idempotency.module.ts'],
  ['lib/idempotency.module-definition.ts', 'lib/idempotency-options.resolve.ts'],
  ['lib/decorators/', 'lib/transports/idempotency-interceptor.order.ts'],
  ['lib/transports/class-idempotency.interceptor.ts'],
  ['lib/transports/method-idempotency.interceptor.ts'],
  ['lib/transports/idempotency.interceptor.ts'],
  ['lib/transports/transport-adapters.ts'],
  ['lib/transports/http/', 'lib/transports/value/'],
  ['lib/request/', 'lib/transports/transport-adapter.interface.ts'],
  ['lib/execution/'],
  ['lib/store/postgres/', 'lib/recovery/', 'lib/idempotency.problems.ts'],
  ['lib/store/'],
  ['lib/telemetry/'],
  [
    'lib/idempotency.defaults.ts',
    'lib/idempotency-options.check.ts',
    'lib/idempotency-storage.check.ts',
  ],
  [
    'lib/response-cipher.ts',
    'lib/closest-name.ts',
    'lib/describe-value.ts',
    'lib/idempotent-routes.scan.ts',
  ],
  ['lib/interfaces/', 'lib/idempotency.constants.ts', 'lib/idempotency-internal.constants.ts'],
];

const rooms = LAYERS.flatMap((layer, depth) => layer.map((room) => ({ room, depth })));
const roomOf = (file) =>
  rooms
    .filter(({ room }) => (room.endsWith('/') ? file.startsWith(room) : file === room))
    .sort((a, b) => b.room.length - a.room.length)[0];

const files = [];
(function walk(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path);
    else if (path.endsWith('.ts')) files.push(path);
  }
})('lib');

const IMPORT = /(?:\bfrom|\bimport)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g;
const importsOf = new Map(
  files.map((file) => [
    file,
    [...readFileSync(file, 'utf8').matchAll(IMPORT)].map((m) =>
      normalize(join(dirname(file), m[1])).replace(/\.js$/, '.ts'),
    ),
  ]),
);

const problems = [];
for (const [file, targets] of importsOf) {
  const from = roomOf(file);
  if (!from) problems.push(`${file} stands in no room of LAYERS (.ci/layers.check.mjs)`);
  for (const target of from ? targets : []) {
    const to = roomOf(target);
    if (!to || to.room === from.room || to.depth > from.depth) continue;
    problems.push(
      `${file} imports ${target}: ${to.room} is ${to.depth === from.depth ? 'beside' : 'above'} ${from.room}`,
    );
  }
}

// File circles, found by a depth-first walk over the imports.
const state = new Map();
const visit = (file, path) => {
  if (state.get(file) === 'done') return;
  if (state.get(file) === 'open') {
    problems.push(`circle: ${[...path.slice(path.indexOf(file)), file].join(' -> ')}`);
    return;
  }
  state.set(file, 'open');
  for (const target of importsOf.get(file) ?? []) visit(target, [...path, file]);
  state.set(file, 'done');
};
for (const file of files) visit(file, []);

if (problems.length > 0) {
  console.error(`lib/ layers broken (top imports only lower ones):\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
