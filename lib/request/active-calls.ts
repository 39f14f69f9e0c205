/**
 * The calls the library's interceptor is handling right now (a request, or a resolver's or
 * message handler's arguments). A controller-level and a method-level `@Idempotent()` both attach
 * the interceptor: the inner one, reached while the outer one runs the handler, passes through.
 * A call that comes back after the interceptor's answer ended (an app interceptor's `retry()`
 * subscribes the chain again) is not active: it is handled again, never passed through with no
 * claim.
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
