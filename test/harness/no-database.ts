/**
 * setupFiles of the unit tier: no PostgreSQL is started for it, and hiding DATABASE_URL makes a
 * unit spec that reaches for a database fail at once ("DATABASE_URL is not set") instead of
 * quietly using whatever server the environment points at. Each spec file's process.env is its own copy.
 */
delete process.env.DATABASE_URL;
export {};
