import type { DataSource } from 'typeorm';

/** The DataSources the module initialized itself: the module's to close; the app's own stay open. */
const initializedHere = new WeakSet<DataSource>();

/** Initializes `dataSource` for the module, which then closes it at shutdown. */
export async function initializeForModule(dataSource: DataSource): Promise<void> {
  await dataSource.initialize();
  initializedHere.add(dataSource);
}

/** Closes `dataSource` if the module initialized it, once. */
export async function closeIfModuleOwned(dataSource: DataSource | undefined): Promise<void> {
  if (dataSource && initializedHere.delete(dataSource) && dataSource.isInitialized) {
    await dataSource.destroy();
  }
}
