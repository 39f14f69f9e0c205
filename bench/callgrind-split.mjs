#!/usr/bin/env node
// Splits callgrind dumps of a variant's main thread (kept by `npm run bench:instructions --
// --keep DIR`, run with NODE_OPTIONS=--perf-basic-prof) into parts: V8's garbage collector,
// builtins, the rest of V8's runtime, JIT-compiled JavaScript by package (lib/, pg, rxjs, Nest,
// Node), crypto and other native code. JIT addresses are named from /tmp/perf-<pid>.map.
//   node bench/callgrind-split.mjs --requests 1200 DIR/module.out.1-01 DIR/module.out.2-01 ...
// (--requests: the counted requests the dumps cover together, windows × requests per window).
import { readFileSync } from 'node:fs';

const args = process.argv.slice(2);
const at = args.indexOf('--requests');
const requests = at >= 0 ? Number(args.splice(at, 2)[1]) : 1;
const event = 'Ir';

const GC =
  /Scaveng|Heap::|MarkCompact|Marking|Pretenuring|BodyDescriptor|Evacuat|SemiSpace|NewSpace|Sweeper|RememberedSet|SlotSet|HeapObject::SizeFromMap|MemoryChunk|GCTracer|ObjectCache|Ephemeron/;
function part(name) {
  if (GC.test(name)) return 'gc';
  if (name.startsWith('JS ')) {
    if (/dist-bench\/lib\//.test(name)) return 'js lib/';
    if (/node_modules\/pg/.test(name)) return 'js pg';
    if (/node_modules\/rxjs/.test(name)) return 'js rxjs';
    if (/node_modules\/@nestjs/.test(name)) return 'js nest';
    if (/ node:/.test(name)) return 'js node';
    return 'js other';
  }
  if (name.startsWith('Builtins_')) return 'builtins';
  if (/sha256|EVP_|OPENSSL/.test(name)) return 'crypto';
  if (name.startsWith('v8::')) return 'v8 runtime';
  return 'other native';
}

function perfMap(pid) {
  const entries = readFileSync(`/tmp/perf-${pid}.map`, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [start, size, ...name] = line.split(' ');
      return [parseInt(start, 16), parseInt(size, 16), name.join(' ')];
    })
    .sort((a, b) => a[0] - b[0]);
  return (address) => {
    let lo = 0;
    let hi = entries.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (entries[mid][0] <= address) lo = mid + 1;
      else hi = mid - 1;
    }
    const e = entries[hi];
    return e && address < e[0] + e[1] ? `JS ${e[2]}` : undefined;
  };
}

const totals = new Map();
for (const file of args) {
  const text = readFileSync(file, 'utf8');
  const pid = /^pid: (\d+)/m.exec(text)?.[1];
  const jit = perfMap(pid);
  const names = new Map();
  let events = [];
  let fn;
  let skip = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('events:')) events = line.split(/\s+/).slice(1);
    const named = /^c?fn=\((\d+)\)(?: (.*))?$/.exec(line);
    if (named?.[2] !== undefined) names.set(named[1], named[2]);
    if (line.startsWith('fn=')) {
      let name = names.get(named[1]) ?? named[1];
      if (name.startsWith('0x')) name = jit(parseInt(name.split("'")[0], 16)) ?? name;
      fn = part(name);
    } else if (line.startsWith('calls=')) skip = true;
    else if (/^[0-9+\-*]/.test(line)) {
      if (skip) skip = false;
      else if (fn) {
        const value = Number(line.split(/\s+/)[1 + events.indexOf(event)] ?? 0);
        totals.set(fn, (totals.get(fn) ?? 0) + value);
      }
    }
  }
}
const all = [...totals.values()].reduce((a, b) => a + b, 0);
console.log(`${(all / requests / 1e3).toFixed(1)} K instructions per request`);
for (const [name, value] of [...totals].sort((a, b) => b[1] - a[1])) {
  console.log(`  ${name.padEnd(14)} ${(value / requests / 1e3).toFixed(1).padStart(7)} K`);
}
