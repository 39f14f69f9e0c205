/** Edit distance (insertions, deletions, substitutions), ignoring case: `TTLSeconds` is a typo too. */
export function editDistance(a: string, b: string): number {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  let previous = Array.from({ length: y.length + 1 }, (_, j) => j);
  for (let i = 1; i <= x.length; i++) {
    const current = [i];
    for (let j = 1; j <= y.length; j++) {
      const substitution = previous[j - 1] + (x[i - 1] === y[j - 1] ? 0 : 1);
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, substitution);
    }
    previous = current;
  }
  return previous[y.length];
}

/**
 * The candidate closest to `name` when it looks like a typo of it: at most a third of the letters
 * (and at least two) differ, or one is the start of the other (`retention`); undefined otherwise.
 */
export function closestName(name: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const distance = editDistance(name, candidate);
    const [short, long] = [name, candidate]
      .map((s) => s.toLowerCase())
      .sort((a, b) => a.length - b.length);
    const close =
      distance <= Math.max(2, Math.floor(long.length / 3)) ||
      (short.length >= 3 && long.startsWith(short));
    if (close && distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}
