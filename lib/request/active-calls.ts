/**
 * One call's handling by the interceptor: active from subscription until its answer ends. `run`
 * is what the transport keeps of the run it started, until that run is concluded; `earlier` the
 * run of the handling before it (a call an app interceptor's `retry()` sent again), for the
 * transport to conclude.
 */
export class CallMark<R> {
  active = true;
  run: R | undefined = undefined;
  constructor(readonly earlier: R | undefined) {}
}

/**
 * The calls the library's interceptor handles (a request, or a resolver's or message handler's
 * arguments), each with its latest mark. The interceptor is attached once per handler
 * (`IdempotencyInterceptorOrder`), so a call that reaches it while active is the same call made
 * again by an app interceptor (a hedge, a re-call): refused as in progress. One that comes back
 * after its answer ended (rxjs `retry()`) is handled again; neither is ever passed to the handler
 * without a claim.
 */
export class ActiveCalls<R = unknown> {
  private readonly marks = new WeakMap<object, CallMark<R>>();

  isActive(call: object): boolean {
    return this.marks.get(call)?.active === true;
  }

  /** The latest mark's run, while that handling is active. */
  activeRun(call: object): R | undefined {
    const mark = this.marks.get(call);
    return mark?.active ? mark.run : undefined;
  }

  begin(call: object): CallMark<R> {
    const mark = new CallMark<R>(this.marks.get(call)?.run);
    this.marks.set(call, mark);
    return mark;
  }
}
