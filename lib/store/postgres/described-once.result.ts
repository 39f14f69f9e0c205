import pg from 'pg';
import type { TypeSource } from './store-types.js';

/** A column of a RowDescription as pg-protocol parsed it. */
export interface PgField {
  name: string;
  dataTypeID: number;
  format?: string;
}
/** A statement's kept columns on one connection, and pg's empty row for them once built. */
export interface KeptColumns {
  fields: PgField[];
  empty?: object;
}
/** The parts of pg's Result this relies on (pg 8: lib/result.js), checked below. */
interface PgResult {
  fields: PgField[];
  _types?: TypeSource;
  _parsers?: unknown[];
  _prebuiltEmptyResultObject: object | null;
  addFields(fields: PgField[]): void;
}
type PgResultClass = new (rowMode?: string, types?: TypeSource) => PgResult;

const { Result, types } = pg as unknown as { Result?: PgResultClass; types?: TypeSource };

/**
 * pg's `addFields` sets the result's columns, their parsers and an empty row with the columns'
 * names, and nothing else (probed once on a throwaway Result: any other state it sets, or parsers
 * looked up elsewhere, and pg's own `addFields` is used every time).
 */
function addFieldsSetsColumnsParsersAndEmptyRow(): boolean {
  if (typeof Result !== 'function' || typeof types?.getTypeParser !== 'function') return false;
  try {
    const probe = new Result(undefined, undefined);
    const before: Record<string, unknown> = { ...probe };
    const fields = [
      { name: 'a', dataTypeID: 25, format: 'text' },
      { name: 'b', dataTypeID: 23, format: 'text' },
    ];
    probe.addFields(fields);
    const after = probe as unknown as Record<string, unknown>;
    const changed = Object.keys(after).filter((k) => !(k in before) || after[k] !== before[k]);
    return (
      changed.sort().join() === '_parsers,_prebuiltEmptyResultObject,fields' &&
      probe.fields === fields &&
      probe._parsers?.[0] === types.getTypeParser(25, 'text') &&
      probe._parsers?.[1] === types.getTypeParser(23, 'text') &&
      JSON.stringify(probe._prebuiltEmptyResultObject) === '{"a":null,"b":null}'
    );
  } catch {
    return false;
  }
}

/**
 * A Result whose empty row is built once per kept column list: pg builds it on every execution
 * as a dictionary object of the column names and a copy of that (~3 µs for a claim's 13 columns,
 * more than the rest of its row handling). The parsers are still looked up on every execution,
 * as pg does, so a type parser registered later applies. Undefined when pg's Result differs.
 */
export const DescribedResult = addFieldsSetsColumnsParsersAndEmptyRow()
  ? class DescribedResult extends (Result as PgResultClass) {
      /** Set by the query before a RowDescription of a kept statement is handled. */
      kept: KeptColumns | undefined = undefined;

      override addFields(fields: PgField[]): void {
        const kept = this.kept;
        if (kept?.empty === undefined || kept.fields !== fields) {
          super.addFields(fields);
          if (kept?.fields === fields) kept.empty = this._prebuiltEmptyResultObject ?? undefined;
          return;
        }
        const source = this._types ?? (types as TypeSource);
        const parsers = new Array<unknown>(fields.length);
        for (let i = 0; i < fields.length; i++) {
          parsers[i] = source.getTypeParser(fields[i].dataTypeID, fields[i].format || 'text');
        }
        this.fields = fields;
        if (fields.length) this._parsers = parsers;
        this._prebuiltEmptyResultObject = kept.empty;
      }
    }
  : undefined;
