import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError } from './errors.js';

const CHARSET = /;\s*charset\s*=\s*"?([^";\s]+)/i;

/**
 * Bodies are read as uncompressed UTF-8 JSON. A compressed one would be refused as "not valid
 * JSON", and one in another charset read wrongly: both are 415 naming the header instead.
 */
export function refuseEncodedBodies(app: FastifyInstance): void {
  app.addHook('preParsing', (request, _reply, payload, done) => {
    const refusal = encodingRefusal(request);
    if (refusal) done(refusal);
    else done(null, payload);
  });
}

function encodingRefusal({ headers }: FastifyRequest): ApiError | undefined {
  const coding = headers['content-encoding'];
  if (coding !== undefined && coding.trim().toLowerCase() !== 'identity')
    return new ApiError(
      415,
      'unsupported_media_type',
      `content-encoding ${coding} is not accepted; send the body uncompressed`,
      { field: 'content-encoding' },
    );
  const charset = headers['content-type'] && CHARSET.exec(headers['content-type'])?.[1]?.toLowerCase();
  if (charset && charset !== 'utf-8' && charset !== 'utf8')
    return new ApiError(415, 'unsupported_media_type', `send the body as UTF-8, not ${charset}`, {
      field: 'content-type',
    });
  return undefined;
}
