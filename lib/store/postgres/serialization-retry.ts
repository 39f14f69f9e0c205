/** SQLSTATE of a statement PostgreSQL refused for its serialization check (40001). */
export const SERIALIZATION_FAILURE = '40001';
/** The SQLSTATEs PostgreSQL answers with "The transaction might succeed if retried". */
const RETRYABLE = new Set([SERIALIZATION_FAILURE, '40P01']);
const ATTEMPTS = 5;

/**
 * Sends again a statement that is a whole transaction by itself (autocommit, fenced by the claim's
 * token, so a second send changes nothing the first did) when PostgreSQL refused it for its
 * serialization check or a deadlock: under SERIALIZABLE even a one-row DELETE can be canceled as
 * a pivot, and a release given up would keep the key in progress until its lease ends.
 */
export async function retryingSerialization<T>(statement: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await statement();
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (attempt >= ATTEMPTS || typeof code !== 'string' || !RETRYABLE.has(code)) throw err;
      await new Promise((resolve) => setTimeout(resolve, attempt * 5));
    }
  }
}
