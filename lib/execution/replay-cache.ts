import type { ReplayCacheLimits } from '../idempotency.defaults.js';
import type { StoredResponse } from '../interfaces/idempotency-store.interface.js';

interface Entry {
  requestHash: string;
  recordId: string;
  expiresAt: Date;
  response: StoredResponse;
  /**
   * `performance.now()` deadline: before the record's expiry as measured by the database, never
   * after. Monotonic, so a wall clock stepped back cannot keep an entry past its record.
   */
  deadline: number;
  bytes: number;
}

/**
 * Completed responses kept in memory, so a hot replay needs no round trip. Safe because a
 * completed record never changes before its `expires_at` (only an expired record is taken over
 * or deleted), and entries die before that moment, measured from the database's own clock.
 * Least recently used entries go first.
 */
export class ReplayCache {
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;
  private oldest: Iterator<[string, Entry]> | undefined;

  /** `false`: a cache that keeps nothing (the `replayCache: false` option). */
  constructor(private readonly limits: ReplayCacheLimits | false) {}

  static scopeKey(userId: string, endpoint: string, key: string): string {
    return `${userId}\u0000${endpoint}\u0000${key}`;
  }

  get(scopeKey: string, requestHash: string): Entry | undefined {
    if (!this.limits) return undefined;
    const entry = this.entries.get(scopeKey);
    if (!entry) return undefined;
    if (entry.deadline <= performance.now()) {
      this.delete(scopeKey, entry);
      return undefined;
    }
    if (entry.requestHash !== requestHash) return undefined;
    this.entries.delete(scopeKey);
    this.entries.set(scopeKey, entry);
    return entry;
  }

  /** `secondsLeft`: the record's remaining life by the database clock. */
  set(
    scopeKey: string,
    value: { requestHash: string; recordId: string; expiresAt: Date; response: StoredResponse },
    secondsLeft: number,
  ): void {
    if (!this.limits) return;
    const limits = this.limits;
    const bytes = (value.response.body?.length ?? 0) + 256;
    if (value.response.body === null || bytes > limits.maxBytes) return;
    const lifeMs = Math.min(secondsLeft, limits.ttlSeconds) * 1000 - 1000;
    if (lifeMs <= 0) return;
    const old = this.entries.get(scopeKey);
    if (old) this.delete(scopeKey, old);
    this.entries.set(scopeKey, {
      requestHash: value.requestHash,
      recordId: value.recordId,
      expiresAt: value.expiresAt,
      response: value.response,
      deadline: performance.now() + lifeMs,
      bytes,
    });
    this.bytes += bytes;
    while (!this.within(limits) && this.evictOldest());
  }

  /**
   * Through one iterator kept between calls: a new one per call walks, every time, the holes that
   * deleted entries leave at the start of the Map's table until it is rehashed (~7 µs per first
   * call with 10 000 entries). A Map iterates in insertion order and sees entries added after it
   * was made; every entry it has returned was deleted here, and `get` moves an entry by deleting
   * and adding it, so the next entry it returns is always the least recently used.
   */
  private evictOldest(): boolean {
    let next = this.oldest?.next();
    if (!next || next.done) {
      this.oldest = this.entries.entries();
      next = this.oldest.next();
      if (next.done) return false;
    }
    this.delete(next.value[0], next.value[1]);
    return true;
  }

  private within(limits: ReplayCacheLimits): boolean {
    return this.entries.size <= limits.maxEntries && this.bytes <= limits.maxBytes;
  }

  /** Forgets every entry (the server behind the store changed: they may not be there). */
  clear(): void {
    this.entries.clear();
    this.oldest = undefined;
    this.bytes = 0;
  }

  private delete(scopeKey: string, entry: Entry): void {
    this.entries.delete(scopeKey);
    this.bytes -= entry.bytes;
  }
}
