import { readFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import {
  artifactModulePath,
  type ContractName,
  contractSources,
  renderArtifactModule,
} from '../../devkit/contracts/compile.js';

test.each(Object.keys(contractSources) as ContractName[])(
  'the committed %s artifact is exactly what its source compiles to',
  (name) => {
    // If this fails after editing a contract or upgrading OpenZeppelin/solc: `npm run contracts:build`.
    expect(readFileSync(artifactModulePath(name), 'utf8')).toBe(renderArtifactModule(name));
  },
);
