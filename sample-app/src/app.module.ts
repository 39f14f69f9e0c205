import { type DynamicModule, Module, type INestApplication, ValidationPipe } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { BearerAuthGuard } from './auth/bearer-auth.guard.js';
import { PaymentsModule } from './payments/payments.module.js';
import { PgDatabaseModule } from './pg/pg-database.module.js';
import { ormFromEnv, type SampleAppOptions } from './sample.options.js';

@Module({})
export class AppModule {
  static forRoot(options: SampleAppOptions): DynamicModule {
    const orm = options.orm ?? ormFromEnv();
    return {
      module: AppModule,
      imports: [
        // The library registers its cleanup job through SchedulerRegistry; the app owns the scheduler.
        ScheduleModule.forRoot(),
        // The database and the idempotency store on it; the default loads no TypeORM at all.
        orm === 'typeorm'
          ? import('./typeorm/typeorm-database.module.js').then((m) =>
              m.TypeOrmDatabaseModule.forRoot(options),
            )
          : PgDatabaseModule.forRoot(options),
        PaymentsModule.register(options),
      ],
      providers: [{ provide: APP_GUARD, useClass: BearerAuthGuard }],
    };
  }
}

/** App-wide settings shared by main.ts and the e2e test. */
export function configureApp(app: INestApplication): INestApplication {
  app.useGlobalPipes(new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true }));
  return app;
}
