/**
 * Preload (`node --import`) for the clock-jump specs: moves this process's wall clock (`Date`,
 * `Date.now()`) by an offset the spec changes at run time over the IPC channel, as an NTP step or
 * a VM resumed from a snapshot would. Timers and `performance.now()` keep running steadily, as
 * they do when a real wall clock jumps.
 *
 * Message `{ clockShiftMs: n }` adds n ms to the offset; the answer `{ clockOffsetMs }` says it
 * took effect.
 */
const RealDate = Date;
let offsetMs = 0;
const now = () => RealDate.now() + offsetMs;

globalThis.Date = new Proxy(RealDate, {
  construct: (target, args: unknown[], newTarget) =>
    Reflect.construct(target, args.length === 0 ? [now()] : args, newTarget) as object,
  apply: () => new RealDate(now()).toString(),
  get: (target, property, receiver) =>
    property === 'now' ? now : (Reflect.get(target, property, receiver) as unknown),
});

process.on('message', (message: { clockShiftMs?: number }) => {
  if (typeof message?.clockShiftMs !== 'number') return;
  offsetMs += message.clockShiftMs;
  process.send?.({ clockOffsetMs: offsetMs });
});
// The channel must not keep the process alive on its own.
process.channel?.unref();

export {};
