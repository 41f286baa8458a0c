import { ResolutionError } from "../api/errors.ts";
import { ApiError } from "../kube/client.ts";
import type { KindResolver, ResourceInfo } from "../kube/discovery.ts";
import { createAdmissionHandler, DELETE_REFUSAL_SUFFIX } from "./admission.ts";
import { REFUSAL_SUFFIX } from "./admission-source.ts";
import { EXPORT_REFUSAL_SUFFIX } from "./admission-export.ts";
import { SERVICE_ACCOUNT_REFUSAL_SUFFIX } from "./admission-service-account.ts";
import { isInvalidAdmissionReview, type AdmissionReview, type UserInfo } from "./admission-review.ts";

const RESOURCES: Record<string, ResourceInfo> = {
  "v1/ConfigMap": {
    group: "",
    version: "v1",
    resource: "configmaps",
    kind: "ConfigMap",
    namespaced: true,
    verbs: ["get", "list", "watch"],
  },
  "v1/Namespace": {
    group: "",
    version: "v1",
    resource: "namespaces",
    kind: "Namespace",
    namespaced: false,
    verbs: ["get", "list", "watch"],
  },
  "example.com/v1/Database": {
    group: "example.com",
    version: "v1",
    resource: "databases",
    kind: "Database",
    namespaced: true,
    verbs: ["get", "list", "watch"],
  },
};

/** Discovery as the real one answers: InvalidSpec for a malformed apiVersion, KindNotFound for the rest. */
const discovery: KindResolver = {
  lookup: async (apiVersion, kind) => {
    if (apiVersion === "broken")
      throw new ResolutionError(
        "InvalidSpec",
        `apiVersion "broken" is not of the form "v1" or "group/version"`,
      );
    if (apiVersion === "forbidden.example.com/v1")
      throw new ResolutionError(
        "Forbidden",
        "the controller may not read the discovery document of forbidden.example.com/v1",
      );
    const info = RESOURCES[`${apiVersion}/${kind}`];
    if (!info)
      throw new ResolutionError(
        "KindNotFound",
        `no kind ${kind} in ${apiVersion}: the API server does not serve ${apiVersion}`,
      );
    return info;
  },
  invalidate: () => undefined,
};

const ALICE: UserInfo = {
  username: "alice",
  uid: "u-1",
  groups: ["dev", "system:authenticated"],
  extra: { scope: ["a"] },
};

/** Resource attributes the fake authorizer allows alice, as "verb group/resource namespace name". */
const ALLOWED = new Set([
  "get /configmaps team-a db",
  "list /configmaps team-b ",
  "get /namespaces  team-a",
  "get example.com/* team-c ",
  "create /configmaps team-b ",
  "patch /configmaps team-b app",
  "create /secrets team-b ",
  "impersonate /serviceaccounts team-a reader",
]);

function fakeClient(opts: { fail?: boolean } = {}) {
  const asked: string[] = [];
  const bodies: unknown[] = [];
  return {
    asked,
    bodies,
    request: async <T>(method: string, path: string, options?: { body?: unknown }): Promise<T> => {
      expect([method, path]).toEqual(["POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews"]);
      if (opts.fail) throw new ApiError(method, path, 403, "Forbidden", "cannot create subjectaccessreviews");
      bodies.push(options?.body);
      const spec = (options?.body as { spec: { resourceAttributes: Record<string, string> } }).spec;
      const a = spec.resourceAttributes;
      const key = `${a.verb} ${a.group}/${a.resource} ${a.namespace ?? ""} ${a.name ?? ""}`;
      asked.push(key);
      return { status: { allowed: ALLOWED.has(key) } } as T;
    },
  };
}

function review(request: Record<string, unknown>): unknown {
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: "req-1",
      resource: { group: "referable.dev", version: "v1alpha1", resource: "referables" },
      operation: "CREATE",
      userInfo: ALICE,
      ...request,
    },
  };
}

const referable = (source: unknown, extra: Record<string, unknown> = {}) => ({
  apiVersion: "referable.dev/v1alpha1",
  kind: "Referable",
  metadata: { name: "rf" },
  spec: { source, ...extra },
});

const cm = (name: string, namespace = "team-a") => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  namespace,
  name,
  fieldPath: "data.v",
});

interface Case {
  reason: string;
  request: Record<string, unknown>;
  allowed: boolean;
  /** The SubjectAccessReviews asked, as "verb group/resource namespace name". */
  asked: string[];
  message?: string;
  code?: number;
  warning?: RegExp;
  clientFails?: boolean;
}

const exportTo = (kind: string, namespace: string, name: string, key = "K") => ({
  kind,
  namespace,
  name,
  key,
});

const cases: Case[] = [
  {
    reason: "an export target the author may create and patch is allowed, with the source checked too",
    request: { object: referable(cm("db"), { export: [exportTo("ConfigMap", "team-b", "app")] }) },
    allowed: true,
    asked: ["create /configmaps team-b ", "patch /configmaps team-b app", "get /configmaps team-a db"],
  },
  {
    reason: "an author who may not patch the target object is refused, with the permission named",
    request: { object: referable(cm("db"), { export: [exportTo("ConfigMap", "team-b", "other")] }) },
    allowed: false,
    code: 403,
    asked: ["create /configmaps team-b ", "patch /configmaps team-b other"],
    message: `user "alice" may not patch configmaps "other" in namespace "team-b": ${EXPORT_REFUSAL_SUFFIX}`,
  },
  {
    reason: "a Secret target is checked as a Secret, not as a ConfigMap",
    request: { object: referable(cm("db"), { export: [exportTo("Secret", "team-b", "app")] }) },
    allowed: false,
    asked: ["create /secrets team-b ", "patch /secrets team-b app"],
    message: `user "alice" may not patch secrets "app" in namespace "team-b": ${EXPORT_REFUSAL_SUFFIX}`,
  },
  {
    reason: "an update that adds a target is checked, though the source is unchanged",
    request: {
      operation: "UPDATE",
      object: referable(cm("db"), { export: [exportTo("ConfigMap", "team-a", "app")] }),
      oldObject: referable(cm("db")),
    },
    allowed: false,
    asked: ["create /configmaps team-a ", "patch /configmaps team-a app"],
    message: `user "alice" may not create configmaps in namespace "team-a" and may not patch configmaps "app" in namespace "team-a": ${EXPORT_REFUSAL_SUFFIX}`,
  },
  {
    reason: "an update that leaves spec alone (the controller's finalizer) asks nothing",
    request: {
      operation: "UPDATE",
      object: {
        ...referable(cm("other"), { export: [exportTo("ConfigMap", "team-a", "app")] }),
        metadata: { name: "rf", finalizers: [] },
      },
      oldObject: {
        ...referable(cm("other"), { export: [exportTo("ConfigMap", "team-a", "app")] }),
        metadata: { name: "rf", finalizers: ["referable.dev/export"] },
      },
    },
    allowed: true,
    asked: [],
  },
  {
    reason:
      "an update that leaves spec alone is allowed though its transform no longer compiles (cleanup never waits)",
    request: {
      operation: "UPDATE",
      object: referable(cm("other"), { transform: "1 + 'a'" }),
      oldObject: referable(cm("other"), { transform: "1 + 'a'" }),
    },
    allowed: true,
    asked: [],
  },
  {
    reason: "authorization follows the value: a new transform re-checks every target and the source",
    request: {
      operation: "UPDATE",
      object: referable(cm("db"), { export: [exportTo("ConfigMap", "team-b", "app")], transform: "'x'" }),
      oldObject: referable(cm("db"), { export: [exportTo("ConfigMap", "team-b", "app")] }),
    },
    allowed: true,
    asked: ["create /configmaps team-b ", "patch /configmaps team-b app", "get /configmaps team-a db"],
  },
  {
    reason: "a change by an author who may not write an existing target is refused (another tenant's Secret)",
    request: {
      operation: "UPDATE",
      object: referable(cm("db"), { export: [exportTo("Secret", "team-a", "creds")], transform: "'mine'" }),
      oldObject: referable(cm("db"), { export: [exportTo("Secret", "team-a", "creds")] }),
    },
    allowed: false,
    code: 403,
    asked: ["create /secrets team-a ", "patch /secrets team-a creds"],
    message: `user "alice" may not create secrets in namespace "team-a" and may not patch secrets "creds" in namespace "team-a": ${EXPORT_REFUSAL_SUFFIX}`,
  },
  {
    reason: "a change of source alone re-checks the targets it keeps writing",
    request: {
      operation: "UPDATE",
      object: referable(cm("mine"), { export: [exportTo("Secret", "team-a", "creds")] }),
      oldObject: referable(cm("db"), { export: [exportTo("Secret", "team-a", "creds")] }),
    },
    allowed: false,
    asked: ["create /secrets team-a ", "patch /secrets team-a creds"],
  },
  {
    reason: "dropping a target needs patch on it: the controller removes its key there",
    request: {
      operation: "UPDATE",
      object: referable(cm("db")),
      oldObject: referable(cm("db"), { export: [exportTo("Secret", "team-a", "creds")] }),
    },
    allowed: false,
    asked: ["patch /secrets team-a creds"],
    message: `user "alice" may not patch secrets "creds" in namespace "team-a": ${EXPORT_REFUSAL_SUFFIX}`,
  },
  {
    reason: "a target named twice is asked about once",
    request: {
      object: referable(cm("db"), {
        export: [exportTo("ConfigMap", "team-b", "app", "A"), exportTo("ConfigMap", "team-b", "app", "B")],
      }),
    },
    allowed: true,
    asked: ["create /configmaps team-b ", "patch /configmaps team-b app", "get /configmaps team-a db"],
  },
  {
    reason: "a transform that compiles is allowed with the usual access check",
    request: { object: referable(cm("db"), { transform: "'postgres://' + value" }) },
    allowed: true,
    asked: ["get /configmaps team-a db"],
  },
  {
    reason:
      "a field target the controller would refuse (a Secret's stringData) is refused with its message, before any access check",
    request: {
      object: referable(cm("db"), {
        export: [
          { kind: "ConfigMap", namespace: "team-b", name: "app", key: "K" },
          { apiVersion: "v1", kind: "Secret", namespace: "team-b", name: "s", fieldPath: "stringData.token" },
        ],
      }),
    },
    allowed: false,
    asked: [],
    code: 422,
    message: expect.stringMatching(
      /^spec\.export\[1\]\.fieldPath must not be under stringData: .*base64 transform/,
    ) as unknown as string,
  },
  {
    reason: "a transform that does not parse is refused with its position, before any access check",
    request: { object: referable(cm("db"), { transform: "value +" }) },
    allowed: false,
    asked: [],
    code: 422,
    message: "spec.transform: does not parse: Unexpected token: EOF (at line 1, column 8)",
  },
  {
    reason:
      "a transform whose estimated worst-case cost with inputs of --max-value-bytes is over the budget is refused, with the estimate, before any access check",
    request: {
      object: referable(cm("db"), {
        selection: { mode: "Multiple" },
        transform: "values.map(a, values.map(b, values.map(c, a + b + c))).size()",
      }),
    },
    allowed: false,
    asked: [],
    code: 422,
    message:
      "spec.transform: its estimated worst-case cost is 267404771301788, over the budget of 1000000 (inputs of up to 32768 bytes, --max-value-bytes): iterate over less, or avoid nested comprehensions and repeated searches over large values",
  },
  {
    reason: "a transform that does not type-check for its mode is refused",
    request: {
      object: referable(
        { ...cm("db"), name: undefined, selector: {} },
        { selection: { mode: "Single" }, transform: "values.size()" },
      ),
    },
    allowed: false,
    asked: [],
    code: 422,
    message:
      "spec.transform: does not type-check: Unknown variable: values (values is bound in mode Multiple; use value) (at line 1, column 1)",
  },
  {
    reason: "an update that only breaks the transform is refused, though the source is unchanged",
    request: {
      operation: "UPDATE",
      object: referable(cm("db"), { transform: "1 + 'a'" }),
      oldObject: referable(cm("db")),
    },
    allowed: false,
    asked: [],
    code: 422,
    message: "spec.transform: does not type-check: no such overload: int + string (at line 1, column 1)",
  },
  {
    reason: "a user who may get the named object is allowed",
    request: { object: referable(cm("db")) },
    allowed: true,
    asked: ["get /configmaps team-a db"],
  },
  {
    reason: "a user who may not get it is refused, with the permission named",
    request: { object: referable(cm("other")) },
    allowed: false,
    code: 403,
    asked: ["get /configmaps team-a other"],
    message: `user "alice" may not get configmaps "other" in namespace "team-a": ${REFUSAL_SUFFIX}`,
  },
  {
    reason: "a selector needs list in the namespace",
    request: {
      object: referable({ ...cm("x", "team-b"), name: undefined, selector: { matchLabels: { app: "web" } } }),
    },
    allowed: true,
    asked: ["list /configmaps team-b "],
  },
  {
    reason: "get does not stand in for list",
    request: { object: referable({ ...cm("x"), name: undefined, selector: {} }) },
    allowed: false,
    asked: ["list /configmaps team-a "],
    message: `user "alice" may not list configmaps in namespace "team-a": ${REFUSAL_SUFFIX}`,
  },
  {
    reason: "both name and selector (InvalidSpec for the controller) asks for both",
    request: { object: referable({ ...cm("db"), selector: {} }) },
    allowed: false,
    asked: ["get /configmaps team-a db", "list /configmaps team-a "],
    message: `user "alice" may not list configmaps in namespace "team-a": ${REFUSAL_SUFFIX}`,
  },
  {
    reason: "a cluster-scoped kind is asked cluster-wide, even when a namespace is written",
    request: {
      object: referable({
        apiVersion: "v1",
        kind: "Namespace",
        namespace: "team-a",
        name: "team-a",
        fieldPath: "metadata.name",
      }),
    },
    allowed: true,
    asked: ["get /namespaces  team-a"],
  },
  {
    reason: "a namespaced kind without a namespace is asked cluster-wide, the stricter question",
    request: { object: referable({ ...cm("db"), namespace: undefined }) },
    allowed: false,
    asked: ["get /configmaps  db"],
    message: `user "alice" may not get configmaps "db" cluster-wide: ${REFUSAL_SUFFIX}`,
  },
  {
    reason: "a resource of a named group is written resource.group",
    request: {
      object: referable({
        apiVersion: "example.com/v1",
        kind: "Database",
        namespace: "team-a",
        name: "db",
        fieldPath: "status.x",
      }),
    },
    allowed: false,
    asked: ["get example.com/databases team-a db"],
    message: `user "alice" may not get databases.example.com "db" in namespace "team-a": ${REFUSAL_SUFFIX}`,
  },
  {
    reason: "a kind not served yet is allowed only with access to every resource of its group",
    request: {
      object: referable({
        apiVersion: "example.com/v1",
        kind: "Queue",
        namespace: "team-c",
        name: "q",
        fieldPath: "spec.url",
      }),
    },
    allowed: true,
    asked: ["get example.com/* team-c "],
    warning: /Queue is not served by example.com\/v1 yet/,
  },
  {
    reason: "a kind not served yet, without that access, is refused with both facts",
    request: {
      object: referable({
        apiVersion: "example.com/v1",
        kind: "Queue",
        namespace: "team-a",
        name: "q",
        fieldPath: "spec.url",
      }),
    },
    allowed: false,
    asked: ["get example.com/* team-a "],
    message: `no kind Queue in example.com/v1: the API server does not serve example.com/v1; until the kind is served, which permission reading it needs cannot be checked, and user "alice" may not get every resource of API group "example.com" in namespace "team-a": create the Referable once the kind is served (${REFUSAL_SUFFIX})`,
  },
  {
    reason: "an apiVersion the controller cannot use reads nothing: allowed with a warning, nothing asked",
    request: { object: referable({ ...cm("db"), apiVersion: "broken" }) },
    allowed: true,
    asked: [],
    warning: /the controller reads nothing until spec.source is fixed/,
  },
  {
    reason: "a source with neither name nor selector reads nothing",
    request: {
      object: referable({ apiVersion: "v1", kind: "ConfigMap", namespace: "team-a", fieldPath: "data.v" }),
    },
    allowed: true,
    asked: [],
    warning: /neither a name nor a selector/,
  },
  {
    reason: "discovery refused to the webhook fails closed",
    request: { object: referable({ ...cm("db"), apiVersion: "forbidden.example.com/v1" }) },
    allowed: false,
    code: 500,
    asked: [],
    message: `could not check whether user "alice" may read spec.source: the controller may not read the discovery document of forbidden.example.com/v1; retry`,
  },
  {
    reason: "a SubjectAccessReview that cannot be made fails closed",
    request: { object: referable(cm("db")) },
    clientFails: true,
    allowed: false,
    code: 500,
    asked: [],
    message: `could not ask the API server whether user "alice" may get configmaps "db" in namespace "team-a": POST /apis/authorization.k8s.io/v1/subjectaccessreviews: 403 Forbidden; retry`,
  },
  {
    reason: "an update that changes spec.source is checked",
    request: { operation: "UPDATE", object: referable(cm("other")), oldObject: referable(cm("db")) },
    allowed: false,
    asked: ["get /configmaps team-a other"],
    message: `user "alice" may not get configmaps "other" in namespace "team-a": ${REFUSAL_SUFFIX}`,
  },
  {
    reason: "an update that leaves spec alone (key order aside) asks nothing",
    request: {
      operation: "UPDATE",
      object: referable(
        { fieldPath: "data.v", name: "other", namespace: "team-a", kind: "ConfigMap", apiVersion: "v1" },
        { default: 1 },
      ),
      oldObject: referable(cm("other"), { default: 1 }),
    },
    allowed: true,
    asked: [],
  },
  {
    reason: "an update that changes only spec.default is checked: it decides what is published",
    request: {
      operation: "UPDATE",
      object: referable(cm("other"), { default: 1 }),
      oldObject: referable(cm("other")),
    },
    allowed: false,
    asked: ["get /configmaps team-a other"],
    message: `user "alice" may not get configmaps "other" in namespace "team-a": ${REFUSAL_SUFFIX}`,
  },
  {
    reason: "a status update is not judged",
    request: {
      operation: "UPDATE",
      subResource: "status",
      object: referable(cm("other")),
      oldObject: referable(cm("db")),
    },
    allowed: true,
    asked: [],
  },
  {
    reason: "deleting a Referable without field targets asks nothing",
    request: {
      operation: "DELETE",
      oldObject: referable(cm("other"), { export: [exportTo("ConfigMap", "team-b", "other")] }),
    },
    allowed: true,
    asked: [],
  },
  {
    reason: "deleting a Referable whose field targets the deleter may patch is allowed",
    request: {
      operation: "DELETE",
      oldObject: referable(cm("other"), { export: [cm("app", "team-b")] }),
    },
    allowed: true,
    asked: ["patch /configmaps team-b app"],
  },
  {
    reason:
      "deleting a Referable with a field target the deleter may not patch is refused (it would release the field)",
    request: {
      operation: "DELETE",
      oldObject: referable(cm("db"), { export: [cm("app", "team-b"), cm("other", "team-b")] }),
    },
    allowed: false,
    asked: ["patch /configmaps team-b app", "patch /configmaps team-b other"],
    message: `user "alice" may not delete Referable "rf": deleting it releases its fields of spec.export, and the user may not patch configmaps "other" in namespace "team-b"; ${DELETE_REFUSAL_SUFFIX}`,
  },
  {
    reason: "a member of system:masters deletes without a question",
    request: {
      operation: "DELETE",
      userInfo: { username: "root", groups: ["system:masters", "system:authenticated"] },
      oldObject: referable(cm("db"), { export: [cm("other", "team-b")] }),
    },
    allowed: true,
    asked: [],
  },
  {
    reason:
      "deleting a Referable whose field target's kind is not served asks nothing (nothing is released there)",
    request: {
      operation: "DELETE",
      oldObject: referable(cm("db"), {
        export: [{ apiVersion: "gone.example.com/v1", kind: "Thing", name: "t", fieldPath: "spec.x" }],
      }),
    },
    allowed: true,
    asked: [],
  },
  {
    reason: "a field target in another Referable (the read pivot) is refused before any question",
    request: {
      object: referable(cm("db"), {
        export: [
          cm("app", "team-b"),
          {
            apiVersion: "referable.dev/v1alpha1",
            kind: "Referable",
            name: "x",
            fieldPath: "spec.source.namespace",
          },
        ],
      }),
    },
    allowed: false,
    code: 422,
    asked: [],
    message:
      "spec.export[1] must not name a Referable of referable.dev/v1alpha1: no value is exported into such an object, because objects of the referable.dev group steer this controller (a Referable's spec decides what it reads and writes, with its own rights); export into the application's own objects instead",
  },
  {
    reason:
      "a field target in another Referable's spec.export (the write pivot) is refused before any question",
    request: {
      operation: "UPDATE",
      object: referable(cm("db"), {
        export: [{ apiVersion: "referable.dev/v1", kind: "Referable", name: "x", fieldPath: "spec.export" }],
      }),
      oldObject: referable(cm("db")),
    },
    allowed: false,
    code: 422,
    asked: [],
  },
  {
    reason: "a field target in a RoleBinding is refused before any question",
    request: {
      object: referable(cm("db"), {
        export: [
          {
            apiVersion: "rbac.authorization.k8s.io/v1",
            kind: "RoleBinding",
            namespace: "team-a",
            name: "x",
            fieldPath: "roleRef.name",
          },
        ],
      }),
    },
    allowed: false,
    code: 422,
    asked: [],
  },
  {
    reason: "naming a ServiceAccount the author may impersonate is allowed, with the rest checked too",
    request: { object: referable(cm("db"), { serviceAccountRef: { namespace: "team-a", name: "reader" } }) },
    allowed: true,
    asked: ["impersonate /serviceaccounts team-a reader", "get /configmaps team-a db"],
  },
  {
    reason: "naming a ServiceAccount the author may not impersonate is refused, saying what to grant",
    request: { object: referable(cm("db"), { serviceAccountRef: { namespace: "team-b", name: "writer" } }) },
    allowed: false,
    asked: ["impersonate /serviceaccounts team-b writer"],
    message: `user "alice" may not impersonate serviceaccounts "writer" in namespace "team-b": ${SERVICE_ACCOUNT_REFUSAL_SUFFIX}; grant it with a Role in namespace "team-b" with apiGroups [""], resources [serviceaccounts], resourceNames ["writer"], verbs [impersonate], and a RoleBinding of that Role to the user`,
  },
  {
    reason: "changing the ServiceAccount to one the author may not impersonate is refused",
    request: {
      operation: "UPDATE",
      object: referable(cm("db"), { serviceAccountRef: { namespace: "team-b", name: "writer" } }),
      oldObject: referable(cm("db"), { serviceAccountRef: { namespace: "team-a", name: "reader" } }),
    },
    allowed: false,
    asked: ["impersonate /serviceaccounts team-b writer"],
  },
  {
    reason: "an update that keeps the ServiceAccount asks nothing about it",
    request: {
      operation: "UPDATE",
      object: referable(cm("db"), {
        serviceAccountRef: { namespace: "team-b", name: "writer" },
        default: "x",
      }),
      oldObject: referable(cm("db"), { serviceAccountRef: { namespace: "team-b", name: "writer" } }),
    },
    allowed: true,
    asked: ["get /configmaps team-a db"],
  },
  {
    reason: "a serviceAccountRef without a namespace is refused, not let by unchecked",
    request: { object: referable(cm("db"), { serviceAccountRef: { name: "writer" } }) },
    allowed: false,
    code: 422,
    asked: [],
    message: "spec.serviceAccountRef must name a ServiceAccount by namespace and name",
  },
  {
    reason: "another resource is not ours to judge",
    request: { resource: { group: "", version: "v1", resource: "configmaps" }, object: { data: {} } },
    allowed: true,
    asked: [],
  },
];

describe("createAdmissionHandler", () => {
  it.each(cases)("$reason", async (c) => {
    const client = fakeClient({ fail: c.clientFails ?? false });
    const handler = createAdmissionHandler({ client, discovery });
    const out: AdmissionReview = await handler(review(c.request));
    expect(out.apiVersion).toBe("admission.k8s.io/v1");
    expect(out.kind).toBe("AdmissionReview");
    expect(out.response?.uid).toBe("req-1");
    expect({ allowed: out.response?.allowed, asked: client.asked }).toEqual({
      allowed: c.allowed,
      asked: c.asked,
    });
    if (c.message !== undefined) expect(out.response?.status?.message).toEqual(c.message);
    if (!c.allowed) expect(out.response?.status?.code).toBe(c.code ?? 403);
    if (c.warning) expect(out.response?.warnings?.join("\n")).toMatch(c.warning);
    else expect(out.response?.warnings).toBeUndefined();
  });

  describe("a change of spec made as the controller itself", () => {
    const update = (userInfo: UserInfo, change: Record<string, unknown>) =>
      review({
        operation: "UPDATE",
        userInfo,
        object: referable(cm("db"), change),
        oldObject: referable(cm("db")),
      });
    const controller: UserInfo = { username: "system:serviceaccount:referable-system:referable-controller" };
    const controllerUsername = async () => controller.username!;

    it("is refused, though the controller may read the source", async () => {
      const client = fakeClient();
      const out = await createAdmissionHandler({ client, discovery, controllerUsername })(
        update(controller, { default: "x" }),
      );
      expect(out.response).toMatchObject({ allowed: false, status: { code: 403 } });
      expect(out.response?.status?.message).toBe(
        `user "${controller.username}" is the controller itself, which never changes a Referable's spec (only its status and finalizers): a spec change made with its credentials is refused, so nothing a Referable does can steer the controller`,
      );
      expect(client.asked).toEqual([]);
    });

    it("is not refused for anyone else, and the controller's finalizer changes are allowed", async () => {
      const client = fakeClient();
      const handler = createAdmissionHandler({ client, discovery, controllerUsername });
      expect((await handler(update(ALICE, { default: "x" }))).response?.allowed).toBe(true);
      const finalizer = await handler(
        review({
          operation: "UPDATE",
          userInfo: controller,
          object: { ...referable(cm("db")), metadata: { name: "rf", finalizers: ["referable.dev/export"] } },
          oldObject: referable(cm("db")),
        }),
      );
      expect(finalizer.response?.allowed).toBe(true);
    });

    it("refuses, asking to retry, when the controller's own username cannot be learned", async () => {
      const out = await createAdmissionHandler({
        client: fakeClient(),
        discovery,
        controllerUsername: async () => {
          throw new Error("the API server is unreachable");
        },
      })(update(ALICE, { default: "x" }));
      expect(out.response).toMatchObject({ allowed: false, status: { code: 500 } });
      expect(out.response?.status?.message).toContain("the API server is unreachable; retry");
    });
  });

  it("asks about the requesting user exactly as the API server authenticated them", async () => {
    const client = fakeClient();
    await createAdmissionHandler({ client, discovery })(review({ object: referable(cm("db")) }));
    expect(client.bodies).toEqual([
      {
        apiVersion: "authorization.k8s.io/v1",
        kind: "SubjectAccessReview",
        spec: {
          user: "alice",
          uid: "u-1",
          groups: ["dev", "system:authenticated"],
          extra: { scope: ["a"] },
          resourceAttributes: {
            verb: "get",
            group: "",
            version: "v1",
            resource: "configmaps",
            namespace: "team-a",
            name: "db",
          },
        },
      },
    ]);
  });

  it("refuses, within its deadline, when the checks hang", async () => {
    const hanging: KindResolver = { lookup: () => new Promise(() => undefined), invalidate: () => undefined };
    const handler = createAdmissionHandler({ client: fakeClient(), discovery: hanging, timeoutMs: 20 });
    const out = await handler(review({ object: referable(cm("db")) }));
    expect(out.response?.allowed).toBe(false);
    expect(out.response?.status?.code).toBe(500);
    expect(out.response?.status?.message).toMatch(
      /^could not check whether user "alice" may read spec.source: .*; retry$/,
    );
  });

  const malformed: Array<{ reason: string; body: unknown }> = [
    { reason: "not an object", body: "text" },
    {
      reason: "another API version",
      body: { apiVersion: "admission.k8s.io/v1beta1", kind: "AdmissionReview", request: {} },
    },
    { reason: "no request", body: { apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview" } },
    {
      reason: "no uid",
      body: { apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: { operation: "CREATE" } },
    },
    {
      reason: "no userInfo",
      body: {
        apiVersion: "admission.k8s.io/v1",
        kind: "AdmissionReview",
        request: { uid: "1", operation: "CREATE", resource: { resource: "x" } },
      },
    },
  ];
  it.each(malformed)("throws InvalidAdmissionReview for a body with $reason", async ({ body }) => {
    const handler = createAdmissionHandler({ client: fakeClient(), discovery });
    const thrown = await handler(body).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(isInvalidAdmissionReview(thrown)).toBe(true);
  });
});
