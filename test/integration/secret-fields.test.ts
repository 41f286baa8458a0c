/**
 * `--allow-secret-export` gates every Secret target, fields as well as keys: a controller started
 * without it reports a field target in a Secret as ExportForbidden and writes nothing there (one
 * started with it writes the same field, so the flag is what stops the first). A `stringData`
 * target (never stored by the API server, so it would be written again every read) is refused
 * when the Referable is written, with what to do instead.
 */
import { afterAll, beforeAll, describe, expect, it, jest } from "@jest/globals";
import { isApiError, type KubeClient, type KubeObject } from "../../src/kube/client.ts";
import {
  createReferable as createReferableAs,
  startTestController,
  tearDownControllers,
  type TestController,
} from "../harness/controller.ts";
import { exportedCondition, waitForExported } from "../harness/export.ts";
import { openScope, uniqueName } from "../harness/kube.ts";

jest.setTimeout(30_000);

/** base64 of "secret": a value the API server takes in a Secret's data. */
const VALUE = "c2VjcmV0";

let admin: KubeClient;
let ns: string;
/** The controller as shipped (Secret exports off), and one with --allow-secret-export. */
let gated: TestController, allowed: TestController;
const cleanup: string[] = [];

beforeAll(async () => {
  ({ admin, ns } = await openScope("secret-fields"));
  cleanup.push(`/api/v1/namespaces/${ns}`);
  gated = await startTestController();
  allowed = await startTestController({ allowSecretExport: true });
}, 60_000);

afterAll(() => tearDownControllers(admin, [gated, allowed], cleanup), 60_000);

async function createSecret(): Promise<string> {
  const name = uniqueName("creds");
  await admin.request("POST", `/api/v1/namespaces/${ns}/secrets`, {
    body: { apiVersion: "v1", kind: "Secret", metadata: { name }, data: { other: "a2VlcA==" } },
  });
  return name;
}

async function createSource(): Promise<Record<string, unknown>> {
  const name = uniqueName("src");
  await admin.request("POST", `/api/v1/namespaces/${ns}/configmaps`, {
    body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name }, data: { v: VALUE } },
  });
  return { apiVersion: "v1", kind: "ConfigMap", namespace: ns, name, fieldPath: "data.v" };
}

const secretField = (name: string, fieldPath: string) => ({
  apiVersion: "v1",
  kind: "Secret",
  namespace: ns,
  name,
  fieldPath,
});

const getSecret = (name: string) =>
  admin.request<KubeObject & { data?: Record<string, string> }>(
    "GET",
    `/api/v1/namespaces/${ns}/secrets/${name}`,
  );

describe("Secret field targets", () => {
  it("without --allow-secret-export a field of a Secret is ExportForbidden and not written; with it, written", async () => {
    const source = await createSource();
    const secret = await createSecret();
    const rf = await createReferableAs(
      admin,
      { source, export: [secretField(secret, "data.token")] },
      { shard: gated.shard },
    );
    const view = await waitForExported(admin, rf, "ExportForbidden");
    expect(exportedCondition(view)!.message).toContain("--allow-secret-export");
    const untouched = await getSecret(secret);
    expect(untouched.data).toEqual({ other: "a2VlcA==" });
    const managers = ((untouched.metadata?.managedFields ?? []) as Array<{ manager: string }>).map(
      (m) => m.manager,
    );
    expect(managers).not.toContain(`referable.dev/${rf}`);

    // The same target, by a controller started with the flag: written.
    const rf2 = await createReferableAs(
      admin,
      { source, export: [secretField(secret, "data.token")] },
      { shard: allowed.shard },
    );
    await waitForExported(admin, rf2, "Exported");
    expect((await getSecret(secret)).data).toEqual({ other: "a2VlcA==", token: VALUE });
  });

  it("refuses a stringData target when the Referable is written, saying to use data with a base64 transform or a key", async () => {
    const source = await createSource();
    const secret = await createSecret();
    for (const fieldPath of ["stringData.token", "stringData[token]"]) {
      const err = await createReferableAs(
        admin,
        { source, export: [secretField(secret, fieldPath)] },
        { shard: allowed.shard },
      ).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isApiError(err, 422)).toBe(true);
      expect((err as Error).message).toContain("stringData");
      expect((err as Error).message).toContain("base64");
    }
  });
});
