import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';

interface Req {
  headers: Record<string, string | string[] | undefined>;
  user?: { sub: string };
}

async function bootstrap() {
  const app = await NestFactory.create(AppModule);
  // Stands in for a JWT guard (req.user = the token's payload, { sub }).
  app.use((req: Req, _res: unknown, next: () => void) => {
    const sub = req.headers['x-test-user'];
    if (typeof sub === 'string') req.user = { sub };
    next();
  });
  app.enableShutdownHooks();
  await app.listen(process.env.PORT ?? 3000);
  // Read by test/package/packed-package.e2e.spec.ts.
  console.log(`READY ${await app.getUrl()}`);
}
await bootstrap();
