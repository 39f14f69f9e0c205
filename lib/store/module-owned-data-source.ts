import type { DataSource } from 'typeorm';

/**
 * The DataSources the module initialized itself, with how many module instances use them (two
 * apps of one process, an HTTP app and a microservice, can share one): the last of them to shut
 * down closes it, so one app's close never cuts the other's runs. The app's own stay open.
 */
const moduleOwned = new WeakMap<DataSource, { users: number; ready: Promise<unknown> }>();

/**
 * Initializes `dataSource` for the module unless the app has (the module then closes it at
 * shutdown), or joins the module instance that did.
 */
export async function useForModule(dataSource: DataSource): Promise<void> {
  const owned = moduleOwned.get(dataSource);
  if (owned) {
    owned.users++;
    await owned.ready;
    return;
  }
  if (dataSource.isInitialized) return;
  const ready = dataSource.initialize();
  moduleOwned.set(dataSource, { users: 1, ready });
  try {
    await ready;
  } catch (err) {
    moduleOwned.delete(dataSource);
    throw err;
  }
}

/** Closes `dataSource` if the module initialized it and this was its last module instance. */
export async function closeIfModuleOwned(dataSource: DataSource | undefined): Promise<void> {
  const owned = dataSource && moduleOwned.get(dataSource);
  if (!owned || --owned.users > 0) return;
  moduleOwned.delete(dataSource);
  if (dataSource.isInitialized) await dataSource.destroy();
}
