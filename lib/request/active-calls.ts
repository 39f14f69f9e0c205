/**
 * The calls the library's interceptor is handling right now (a request, or a resolver's or
 * message handler's arguments), from subscription until its answer ends. The interceptor is
 * attached once per handler (`IdempotencyInterceptorOrder`), so a call that reaches it while
 * active is the same call made again by an app interceptor (a hedge, a re-call): refused as in
 * progress. One that comes back after its answer ended (rxjs `retry()`) is handled again; neither
 * is ever passed to the handler without a claim.
 */
export class ActiveCalls {
  private readonly calls = new WeakMap<object, object>();

  has(call: object): boolean {
    return this.calls.has(call);
  }

  /** Marks `call` active; the returned function ends this mark only (not a later one's). */
  begin(call: object): () => void {
    const mark = {};
    this.calls.set(call, mark);
    return () => {
      if (this.calls.get(call) === mark) this.calls.delete(call);
    };
  }
}
