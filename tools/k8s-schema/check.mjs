// Checks Kubernetes manifests against the API's schemas (kubernetes-models,
// which carries them: no cluster, no download) and against what matchd
// needs of them: probes on /readyz and /healthz, a PodDisruptionBudget and
// a Service that select the Deployment's pods.
// Usage: node check.mjs FILE.yaml...   Exits 1 naming every problem.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const problems = [];
const docs = [];
for (const file of process.argv.slice(2)) {
  for (const d of parseAllDocuments(readFileSync(file, "utf8"))) {
    if (d.errors.length) {
      problems.push(`${file}: ${d.errors.map((e) => e.message).join("; ")}`);
      continue;
    }
    const obj = d.toJS();
    if (obj) docs.push({ file, obj });
  }
}

// The model of apiVersion/kind: "apps/v1" -> kubernetes-models/apps/v1.
async function model(apiVersion, kind) {
  const path = `kubernetes-models/${apiVersion}/${kind}`;
  try {
    return (await import(path))[kind];
  } catch {
    return null;
  }
}

for (const { file, obj } of docs) {
  const where = `${file}: ${obj.kind ?? "?"} ${obj.metadata?.name ?? "?"}`;
  const M = await model(obj.apiVersion ?? "", obj.kind ?? "");
  if (!M) {
    problems.push(`${where}: no schema for ${obj.apiVersion} ${obj.kind}`);
    continue;
  }
  try {
    new M(obj).validate();
  } catch (e) {
    problems.push(`${where}: ${e.message}`);
  }
}

const of = (kind) => docs.map((d) => d.obj).filter((o) => o.kind === kind);
const selects = (sel, labels) =>
  sel && Object.entries(sel).every(([k, v]) => labels?.[k] === v);
const deployments = of("Deployment");
if (deployments.length === 0) problems.push("no Deployment");
for (const dep of deployments) {
  const labels = dep.spec?.template?.metadata?.labels;
  for (const c of dep.spec?.template?.spec?.containers ?? []) {
    if (c.readinessProbe?.httpGet?.path !== "/readyz")
      problems.push(`${dep.metadata.name}/${c.name}: readiness is not /readyz`);
    if (c.livenessProbe?.httpGet?.path !== "/healthz")
      problems.push(`${dep.metadata.name}/${c.name}: liveness is not /healthz`);
  }
  const pdbs = of("PodDisruptionBudget").filter((p) =>
    selects(p.spec?.selector?.matchLabels, labels));
  if (pdbs.length === 0)
    problems.push(`${dep.metadata.name}: no PodDisruptionBudget selects its pods`);
  if (!of("Service").some((s) => selects(s.spec?.selector, labels)))
    problems.push(`${dep.metadata.name}: no Service selects its pods`);
  const cms = new Set(of("ConfigMap").map((c) => c.metadata.name));
  for (const c of dep.spec?.template?.spec?.containers ?? [])
    for (const e of c.envFrom ?? [])
      if (e.configMapRef && !cms.has(e.configMapRef.name))
        problems.push(`${dep.metadata.name}: ConfigMap ${e.configMapRef.name} is not among the manifests`);
}

for (const p of problems) console.log(`FAIL: ${p}`);
console.log(`k8s manifests: ${docs.length} objects, ${problems.length} problems`);
process.exit(problems.length ? 1 : 0);
