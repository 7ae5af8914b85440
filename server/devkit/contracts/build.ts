import { writeFileSync } from 'node:fs';
import { artifactModulePath, type ContractName, contractSources, renderArtifactModule } from './compile.js';

for (const name of Object.keys(contractSources) as ContractName[]) {
  writeFileSync(artifactModulePath(name), renderArtifactModule(name));
  console.log(`wrote ${artifactModulePath(name).pathname}`);
}
