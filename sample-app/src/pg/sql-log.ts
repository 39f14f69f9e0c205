import type { Logger } from '@nestjs/common';
import type pg from 'pg';

/** `SAMPLE_LOG_SQL=1`: logs every statement of every connection (BEGIN and COMMIT included). */
export function logStatements(pool: pg.Pool, logger: Logger): void {
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    client.query = ((...args: unknown[]) => {
      const [first, values] = args as [string | { text: string; values?: unknown[] }, unknown];
      const text = typeof first === 'string' ? first : first.text;
      const params = typeof first === 'string' ? values : first.values;
      logger.log(
        `${text.replace(/\s+/g, ' ').trim()}${Array.isArray(params) && params.length ? ` -- ${JSON.stringify(params)}` : ''}`,
      );
      return query(...args);
    }) as typeof client.query;
  });
}
