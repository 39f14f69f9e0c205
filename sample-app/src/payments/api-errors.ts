import { HttpException } from '@nestjs/common';

/** Error bodies in the style of card APIs: a stable `type` + `code` for clients to branch on. */
export interface ApiErrorBody {
  type: 'card_error' | 'invalid_request_error' | 'authentication_error';
  code: string;
  message: string;
  [extra: string]: unknown;
}

export const apiError = (status: number, body: ApiErrorBody) => new HttpException(body, status);

export const notFound = (what: 'payment' | 'refund', id: string) =>
  apiError(404, {
    type: 'invalid_request_error',
    code: 'resource_missing',
    message: `No such ${what}: '${id}'`,
    param: 'id',
  });
