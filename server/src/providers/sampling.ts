import type { CatalogModel } from '../catalog/catalog.js';
import { SAMPLING_PARAMETERS } from '../catalog/catalog.js';
import type { ChatRequest } from './openai-types.js';

/**
 * The request with only the sampling parameters its model takes (its catalog `sampling`): the
 * others are left out, as OpenRouter does, since clients written for many models send a
 * `temperature` by default and the provider would refuse the whole request for it. Of a group the
 * model takes only one of, the first given is kept.
 */
export function withModelSampling(request: ChatRequest, model: CatalogModel): ChatRequest {
  const { parameters, notTogether } = model.sampling;
  const dropped = new Set(SAMPLING_PARAMETERS.filter((name) => !parameters.includes(name)));
  for (const group of notTogether) {
    const given = group.filter((name) => request[name] != null);
    for (const name of given.slice(1)) dropped.add(name);
  }
  if (![...dropped].some((name) => request[name] != null)) return request;
  const kept: ChatRequest = { ...request };
  for (const name of dropped) delete kept[name];
  return kept;
}
