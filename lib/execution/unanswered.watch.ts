import type { ResolvedIdempotencyOptions } from '../idempotency.defaults.js';
import type { IdempotentRoute } from './idempotent-route.resolver.js';
import { type InFlightRuns, type UnansweredRun, watchUnanswered } from './in-flight-runs.js';
import type { LeaseHeartbeat } from './lease-heartbeat.js';
import type { OutcomeRecorder } from './outcome.recorder.js';

/** How long a run holding an idle transaction waits for an answer to a caller that left. */
const IDLE_TRANSACTION_WAIT_MS = 500;

/**
 * Watches a run whose handler returned with nothing written yet, and says when it is concluded
 * for a caller that left. What is recorded then is `IdempotentExecution`'s to decide.
 */
export class UnansweredWatch implements UnansweredRun {
  /** Watcher ticks its caller has been gone with nothing written. */
  private silent = 0;
  private waitingSince = 0;
  /** A transactional run waiting for its answer: checked again soon (its transaction idles). */
  private answerCheck?: NodeJS.Timeout;
  /** Set by the run's `end()`, with its `done`: the claim was completed or released. */
  private stopped = false;

  constructor(
    private readonly options: ResolvedIdempotencyOptions,
    private readonly route: IdempotentRoute,
    private readonly inFlight: InFlightRuns,
    private readonly heartbeat: LeaseHeartbeat,
    private readonly recorder: OutcomeRecorder,
    private readonly callerGone: () => boolean,
    /** Records the run without a body, its caller gone. */
    private readonly conclude: () => void,
  ) {}

  /**
   * Its handler returned, and nothing is written yet: Nest writes a value, an app's late
   * interceptor or hook its answer, a `@Res()` callback when it fires, but starts no stream (a
   * web `Response`, a `Readable`, `res.download()`) for a caller that left. With the caller gone,
   * the run is recorded without a body after a lease of silence, after 0.5 s when it holds a
   * transaction open (idle meanwhile: `idle_in_transaction_session_timeout` would roll it back),
   * and a `@Res()` handler's only past `maxHoldSeconds` (its callback may fire late); at once past
   * `maxHoldSeconds`, or at a graceful shutdown. Never left to lapse.
   */
  awaitAnswer(): void {
    this.silent = 0;
    this.waitingSince = performance.now();
    const everyMs = (this.options.leaseSeconds * 1000) / 3;
    watchUnanswered(this.inFlight, this, everyMs);
    if (this.recorder.transaction?.active && !this.route.ownsResponse) {
      this.answerCheck = setTimeout(() => this.concludeIfGone(), IDLE_TRANSACTION_WAIT_MS);
      this.answerCheck.unref();
    }
  }

  /** @internal Checked by the watcher while nothing is written: silence is counted in ticks. */
  tick(): void {
    this.silent = this.callerGone() ? this.silent + 1 : 0;
    if (this.silent === 0) return;
    if (this.heartbeat.expired || this.recorder.abortedBy) return this.concludeIfGone();
    if (this.route.ownsResponse) return;
    const idling =
      this.recorder.transaction?.active &&
      performance.now() - this.waitingSince >= IDLE_TRANSACTION_WAIT_MS;
    if (this.silent >= 3 || idling) this.concludeIfGone();
  }

  /** @internal */
  concludeIfGone(): void {
    if (this.stopped || !this.callerGone()) return;
    this.inFlight.unanswered.delete(this);
    this.conclude();
  }

  /** The run ended (answered, or concluded): nothing more to watch. */
  stop(): void {
    this.stopped = true;
    this.inFlight.unanswered.delete(this);
    if (this.answerCheck) clearTimeout(this.answerCheck);
  }
}
