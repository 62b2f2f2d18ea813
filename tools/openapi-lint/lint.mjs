// Lints an OpenAPI document with Redocly's recommended rules (redocly.yaml
// beside this file; the exceptions, each with its reason, in
// .redocly.lint-ignore.yaml): prints every problem and exits 1 when there
// is any, 0 when there are none, 2 when it cannot run.
//   node lint.mjs SPEC
import { lint, loadConfig } from '@redocly/openapi-core';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const spec = process.argv[2];
if (!spec) {
  console.error('usage: node lint.mjs SPEC');
  process.exit(2);
}
try {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const config = await loadConfig({ configPath: path.join(here, 'redocly.yaml') });
  const problems = (await lint({ ref: spec, config })).filter((p) => !p.ignored);
  for (const p of problems) {
    const where = p.location?.[0]?.pointer ?? '';
    console.log(`${p.severity}: ${p.ruleId}: ${p.message} ${where}`);
  }
  console.log(`openapi lint: ${problems.length} problem(s) in ${spec}`);
  process.exit(problems.length === 0 ? 0 : 1);
} catch (e) {
  console.error(`openapi lint: ${e.message}`);
  process.exit(2);
}
