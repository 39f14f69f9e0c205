/** `-1`, `NaN`, `string "3600"`: what was passed, with its type when it is not a number. */
export function describeValue(value: unknown): string {
  if (typeof value === 'number') return String(value);
  let shown: string;
  try {
    shown = JSON.stringify(value) ?? String(value);
  } catch {
    shown = String(value);
  }
  return `${value === null ? 'null' : typeof value} ${shown}`;
}
