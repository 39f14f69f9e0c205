import { NestFactory } from '@nestjs/core';

/**
 * Starts a child app the way the reliability specs expect: on a free port of 127.0.0.1, printing
 * `READY {"port":..,"pid":..}` once it accepts requests, and exiting when stdin closes (the
 * spawning jest worker is gone).
 */
export function serveChildApp(module: unknown, instance: string): void {
  const main = async () => {
    // The spec holds our stdin: if its jest worker dies, the pipe closes and we go too.
    process.stdin.on('end', () => process.exit(0));
    process.stdin.resume();
    const app = await NestFactory.create(module as never, { logger: ['error', 'warn'] });
    app.enableShutdownHooks(['SIGTERM']);
    await app.listen(0, '127.0.0.1');
    const { port } = app.getHttpServer().address() as { port: number };
    process.stdout.write(`READY ${JSON.stringify({ port, pid: process.pid })}\n`);
  };
  main().catch((error: Error) => {
    process.stderr.write(`child ${instance} failed to start: ${error.stack ?? error.message}\n`);
    process.exit(1);
  });
}
